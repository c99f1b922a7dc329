#!/usr/bin/env python3
"""Lists the C++ functions longer than a limit (default 150 lines), longest first.

    python3 scripts/long_functions.py [--limit N] [DIR ...]     (default DIRS: core app tests fuzz)

A brace counter, not a parser: it skips comments, string and character literals, and counts a
brace block as a function when it opens at namespace or class scope after a parameter list
"(...)" (with qualifiers such as const, noexcept, override or a trailing return type). Lambdas
and blocks inside a function count towards that function. Good enough to find the long ones.
"""
import argparse
import os
import re
import sys

CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else)\b")
CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$")


def strip(text):
    """The text with comments and literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    stack = []  # (kind, name, start line)
    head_start = 0
    line = 1
    found = []
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";":
            head_start = i + 1
        elif c == "{":
            head = text[head_start:i]
            outer_is_container = all(kind == "container" for kind, _, _ in stack)
            kind = "block"
            name = ""
            flat = " ".join(head.split())
            if not outer_is_container:
                kind = "block"
            elif CONTAINER.search(flat) or flat.endswith("extern \"C\"") or flat == "":
                kind = "container"
            elif ")" in flat and not CONTROL.match(flat) and not flat.rstrip().endswith("="):
                m = re.search(r"([~\w:<>]+)\s*\([^()]*(\([^()]*\)[^()]*)*\)\s*[^()]*$", flat)
                if m:
                    kind = "function"
                    name = m.group(1)
            # The line the signature begins on: the first non-blank character of the head.
            lead = len(head) - len(head.lstrip())
            start = line - head[lead:].count("\n") if kind == "function" else line
            stack.append((kind, name, start))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, name, start = stack.pop()
                if kind == "function":
                    found.append((line - start + 1, start, name))
            head_start = i + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=150)
    parser.add_argument("--fail", action="store_true", help="exit 1 when any function is over the limit (ctest)")
    parser.add_argument("dirs", nargs="*", default=["core", "app", "tests", "fuzz"])
    args = parser.parse_args()
    rows = []
    for d in args.dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith((".cpp", ".h", ".cc", ".hpp")):
                    p = os.path.join(root, f)
                    rows += [(length, p, start, name) for length, start, name in functions(p) if length > args.limit]
    for length, p, start, name in sorted(rows, key=lambda r: (-r[0], r[1], r[2])):
        print(f"{length:5d}  {p}:{start}  {name}")
    if args.fail and rows:
        print(f"long_functions: {len(rows)} function(s) over {args.limit} lines (split them into named steps)")
        return 1
    if args.fail:
        print(f"long_functions: no function over {args.limit} lines in {' '.join(args.dirs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
