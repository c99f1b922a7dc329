// Folding pipeline (see fold.h and docs/ARCHITECTURE.md, "core/fold"):
//  1. structural labels per op: an exact one (kind, equation, attrs, operand shapes, dtypes and
//     weight pattern), a coarse one (the same without sizes), and a refined one (the exact label
//     refined with neighbours' labels, Weisfeiler-Lehman style);
//  2. repeats of the exact-label sequence in topological order (periods proposed by the next
//     occurrence of a refined label, compared by rolling hash, extended both ways), phased so
//     that unit boundaries cut the fewest tensors; a unit of several differing layers (top-level
//     scopes) splits into one piece per layer, its partial periods too;
//  3. stretches between repeats: leading units shaped like the neighbouring repeat (same coarse
//     structure, other sizes: an odd layer) and scopes equal to a repeat's piece are carved
//     out; the rest is cut at separators;
//  4. parallel identical branches feeding one variadic join become sibling instances;
//  5. classes by exact comparison op by op (hashes only pick the candidates), runs, siblings.
// Every step is linear in the number of ops and edges (the period search looks at a constant
// window of candidates per position).
#include "fold.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <map>
#include <set>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "../graph/opkinds.h"
#include "../util/error.h"
#include "block_structure.h"

namespace tp {

const BlockClass* FoldedGraph::largestClass() const
{
    const BlockClass* best = nullptr;
    size_t bestOps = 0;
    for (const auto& c : classes) {
        const size_t ops = c.instances.size() * static_cast<size_t>(c.opsPerInstance());
        if (ops > bestOps) {
            bestOps = ops;
            best = &c;
        }
    }
    return best;
}

int BlockClass::opsPerInstance() const { return instances.empty() ? 0 : static_cast<int>(instances[0].ops.size()); }

int FoldedGraph::totalOps() const { return static_cast<int>(classOfOp.size()); }

std::vector<OpId> canonicalOps(const FoldedGraph& folded)
{
    std::vector<OpId> canonical(folded.classOfOp.size());
    for (size_t op = 0; op < canonical.size(); ++op) canonical[op] = static_cast<OpId>(op);
    for (const auto& bc : folded.classes)
        for (const auto& inst : bc.instances)
            for (size_t i = 0; i < inst.ops.size(); ++i) canonical[static_cast<size_t>(inst.ops[i])] = bc.instances[0].ops[i];
    return canonical;
}

int FoldedGraph::searchedOps() const
{
    int sum = 0;
    for (const auto& c : classes) sum += c.opsPerInstance();
    return sum;
}

double FoldedGraph::foldRatio() const
{
    const int searched = searchedOps();
    return searched == 0 ? 1.0 : static_cast<double>(totalOps()) / searched;
}

namespace {

using namespace fold_detail;
using u64 = std::uint64_t;
__extension__ typedef unsigned __int128 u128; // GCC and Clang; exact 61-bit modular products

// How many positions after a candidate start propose periods (the next occurrence of their label).
// A unit is found when one of its first kWindow ops has a label that occurs once per unit.
constexpr int kCandidateWindow = 64;

u64 mix64(u64 x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

u64 combine(u64 seed, u64 value) { return mix64(seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2))); }

u64 hashText(std::string_view text)
{
    u64 h = 0xcbf29ce484222325ULL;
    for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
    return h;
}

u64 hashAttrs(const Attrs& attrs)
{
    u64 h = attrs.size();
    for (const auto& [key, value] : attrs) {
        h = combine(combine(h, hashText(key)), value.index());
        if (auto i = std::get_if<std::int64_t>(&value))
            h = combine(h, static_cast<u64>(*i));
        else if (auto d = std::get_if<double>(&value))
            h = combine(h, std::bit_cast<u64>(*d));
        else if (auto s = std::get_if<std::string>(&value))
            h = combine(h, hashText(*s));
        else if (auto v = std::get_if<std::vector<std::int64_t>>(&value)) {
            h = combine(h, v->size());
            for (auto x : *v) h = combine(h, static_cast<u64>(x));
        }
    }
    return h;
}

// Rolling polynomial hash modulo the Mersenne prime 2^61 - 1 over a label sequence.
class RangeHasher {
public:
    explicit RangeHasher(const std::vector<u64>& labels) : prefix_(labels.size() + 1, 0), power_(labels.size() + 1, 1)
    {
        for (size_t i = 0; i < labels.size(); ++i) {
            prefix_[i + 1] = addMod(mulMod(prefix_[i], kBase), labels[i] % kMod + 1);
            power_[i + 1] = mulMod(power_[i], kBase);
        }
    }
    u64 range(int start, int length) const
    {
        return addMod(prefix_[start + length], kMod - mulMod(prefix_[start], power_[length]));
    }

private:
    static constexpr u64 kMod = (u64{1} << 61) - 1;
    static constexpr u64 kBase = 0x1f3a5b7c9d2e4f61ULL % kMod;
    static u64 mulMod(u64 a, u64 b)
    {
        const u128 p = static_cast<u128>(a) * b;
        u64 r = static_cast<u64>(p & kMod) + static_cast<u64>(p >> 61);
        return r >= kMod ? r - kMod : r;
    }
    static u64 addMod(u64 a, u64 b)
    {
        u64 r = a + b;
        return r >= kMod ? r - kMod : r;
    }
    std::vector<u64> prefix_, power_;
};

// A repeat: `count` consecutive units of `period` positions from `start`.
struct Repeat {
    int start = 0;
    int period = 0;
    int count = 0;
    int lead = 0;  ///< positions before `start` that continue the pattern (a unit's last part)
    int trail = 0; ///< positions after end() that continue the pattern (a unit's first part)
    int end() const { return start + period * count; }
};

// A block before classification: its ops in topological order, and the draft enclosing it when
// it is a sibling branch.
struct Draft {
    std::vector<OpId> ops;
    int parent = -1;
    bool distinct = false;
    BlockDescription description;
    u64 hash = 0;
};

std::string_view topScope(std::string_view name)
{
    const auto slash = name.find('/');
    return slash == std::string_view::npos ? name : name.substr(0, slash);
}

// The scope path of an op name: everything before its last '/'.
std::string_view scopeOf(std::string_view name)
{
    const auto slash = name.rfind('/');
    return slash == std::string_view::npos ? std::string_view{} : name.substr(0, slash);
}

// The longest common prefix of two scope paths that ends at a component boundary.
std::string_view commonScope(std::string_view a, std::string_view b)
{
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    if ((k == a.size() || a[k] == '/') && (k == b.size() || b[k] == '/')) return a.substr(0, k);
    const auto slash = a.substr(0, k).rfind('/');
    return slash == std::string_view::npos ? std::string_view{} : a.substr(0, slash);
}

std::vector<std::string_view> splitScope(std::string_view scope)
{
    std::vector<std::string_view> parts;
    size_t begin = 0;
    while (!scope.empty() && begin <= scope.size()) {
        const auto slash = scope.find('/', begin);
        const auto end = slash == std::string_view::npos ? scope.size() : slash;
        parts.push_back(scope.substr(begin, end - begin));
        begin = end + 1;
    }
    return parts;
}

// Text and digit runs of a name component; '*' counts as a digit run (an earlier wildcard).
std::vector<std::string_view> tokens(std::string_view text)
{
    std::vector<std::string_view> out;
    auto numeric = [](char ch) { return (ch >= '0' && ch <= '9') || ch == '*'; };
    size_t i = 0;
    while (i < text.size()) {
        size_t j = i + 1;
        while (j < text.size() && numeric(text[j]) == numeric(text[i])) ++j;
        out.push_back(text.substr(i, j - i));
        i = j;
    }
    return out;
}

// "layers.3" and "layers.17" -> "layers.*"; "layer2.1" and "layer2.3" -> "layer2.*";
// components that differ in more than numbers -> "*".
std::string generalize(std::string_view a, std::string_view b)
{
    if (a == b) return std::string(a);
    const auto ta = tokens(a), tb = tokens(b);
    if (ta.size() != tb.size()) return "*";
    std::string out;
    for (size_t i = 0; i < ta.size(); ++i) {
        const bool numeric = (ta[i][0] >= '0' && ta[i][0] <= '9') || ta[i][0] == '*';
        const bool otherNumeric = (tb[i][0] >= '0' && tb[i][0] <= '9') || tb[i][0] == '*';
        if (numeric != otherNumeric || (!numeric && ta[i] != tb[i])) return "*";
        out += ta[i] == tb[i] ? std::string(ta[i]) : std::string("*");
    }
    return out;
}

class Folder {
public:
    Folder(const Graph& graph, const FoldOptions& options) : graph_(graph), options_(options), index_(graph) {}

    FoldedGraph run()
    {
        n_ = static_cast<int>(graph_.ops.size());
        if (options_.refinementRounds < 0 || options_.refinementRounds > 64)
            throw InputError("fold option 'refinementRounds' is " + std::to_string(options_.refinementRounds) + "; use 0 to 64");
        for (OpId id : options_.distinctOps)
            if (id < 0 || id >= n_) throw InputError("fold option 'distinctOps': op " + std::to_string(id) + " does not exist");
        order();
        labels();
        widths();
        findRepeats();
        cutIntoUnits();
        extractSiblings();
        return classify();
    }

private:
    const Graph& graph_;
    const FoldOptions& options_;
    GraphIndex index_;
    int n_ = 0;
    std::vector<OpId> order_;
    std::vector<int> pos_;
    std::vector<u64> exact_, coarse_, refined_; // per position
    std::vector<int> nextExact_, nextRefined_;  // per position: next position with the same label
    std::vector<int> width_;                    // per gap g (between positions g-1 and g), 0..n
    std::vector<Repeat> repeats_;
    std::vector<std::pair<int, int>> intervalUnits_; // (start, length) in positions
    std::vector<Draft> drafts_;

    const Op& opAt(int position) const { return graph_.ops[static_cast<size_t>(order_[position])]; }

    // The builders' id order is usually topological already; then it is also what the stable
    // topological order (smallest ready id first) would return, and no queue is needed.
    void order()
    {
        bool idOrderIsTopological = true;
        for (const auto& op : graph_.ops) {
            for (TensorId t : op.inputs)
                if (index_.producer[t] >= op.id) idOrderIsTopological = false;
            if (!idOrderIsTopological) break;
        }
        if (idOrderIsTopological) {
            order_.resize(static_cast<size_t>(n_));
            std::iota(order_.begin(), order_.end(), 0);
        } else {
            order_ = graph_.topologicalOrder();
        }
        pos_.assign(static_cast<size_t>(n_), 0);
        for (int i = 0; i < n_; ++i) pos_[order_[i]] = i;
    }

    void labels()
    {
        std::vector<u64> exactById(static_cast<size_t>(n_)), coarseById(static_cast<size_t>(n_));
        for (const auto& op : graph_.ops) {
            u64 base = combine(static_cast<u64>(op.kind), hashText(op.einsum));
            if (!op.attrs.empty()) base = combine(base, hashAttrs(op.attrs));
            base = combine(base, op.inputs.size() * 64 + op.outputs.size());
            u64 exact = base, coarse = base;
            auto addTensor = [&](TensorId t) {
                const Tensor& tensor = graph_.tensors[t];
                const u64 tag =
                    (static_cast<u64>(tensor.dtype) * 2 + (tensor.role == TensorRole::Weight ? 1 : 0)) * 64 + tensor.shape.size();
                coarse = combine(coarse, tag);
                exact = combine(exact, tag);
                for (auto d : tensor.shape) exact = combine(exact, static_cast<u64>(d));
            };
            for (TensorId t : op.inputs) addTensor(t);
            for (TensorId t : op.outputs) addTensor(t);
            exactById[op.id] = exact;
            coarseById[op.id] = coarse;
        }
        // Refinement: a label also says what feeds each operand and what reads each result.
        std::vector<u64> current = exactById, next(static_cast<size_t>(n_));
        for (int round = 0; round < options_.refinementRounds; ++round) {
            for (const auto& op : graph_.ops) {
                u64 h = current[op.id];
                for (TensorId t : op.inputs) {
                    const OpId p = index_.producer[t];
                    h = combine(h, p >= 0 ? combine(current[p], index_.producerSlot[t]) : 0x51ed270b27aba2c5ULL);
                }
                for (size_t slot = 0; slot < op.outputs.size(); ++slot) {
                    const TensorId t = op.outputs[slot];
                    u64 readers = slot; // a multiset: order-free sum
                    for (int e = index_.consumerStart[t]; e < index_.consumerStart[t + 1]; ++e)
                        readers += mix64(combine(current[index_.consumerOp[e]], index_.consumerSlot[e]));
                    h = combine(h, readers);
                }
                next[op.id] = h;
            }
            current.swap(next);
        }
        exact_.resize(static_cast<size_t>(n_));
        coarse_.resize(static_cast<size_t>(n_));
        refined_.resize(static_cast<size_t>(n_));
        for (int i = 0; i < n_; ++i) {
            exact_[i] = exactById[order_[i]];
            coarse_[i] = coarseById[order_[i]];
            refined_[i] = current[order_[i]];
        }
        nextExact_ = nextOccurrence(exact_);
        nextRefined_ = nextOccurrence(refined_);
    }

    static std::vector<int> nextOccurrence(const std::vector<u64>& labels)
    {
        std::vector<int> next(labels.size(), -1);
        std::unordered_map<u64, int> seen;
        for (int i = static_cast<int>(labels.size()) - 1; i >= 0; --i) {
            auto [it, inserted] = seen.try_emplace(labels[i], i);
            if (!inserted) {
                next[i] = it->second;
                it->second = i;
            }
        }
        return next;
    }

    // Tensors live across each gap of the topological order. Graph inputs count as live from
    // the start, so a gap that an input bypasses is no separator; weights never count.
    void widths()
    {
        std::vector<int> delta(static_cast<size_t>(n_) + 2, 0);
        for (const auto& tensor : graph_.tensors) {
            if (tensor.role == TensorRole::Weight) continue;
            const TensorId t = tensor.id;
            int lastUse = -1;
            for (int e = index_.consumerStart[t]; e < index_.consumerStart[t + 1]; ++e)
                lastUse = std::max(lastUse, pos_[index_.consumerOp[e]]);
            const OpId p = index_.producer[t];
            const int first = p >= 0 ? pos_[p] + 1 : 0;
            if (lastUse < first) continue;
            ++delta[first];
            --delta[lastUse + 1];
        }
        width_.assign(static_cast<size_t>(n_) + 1, 0);
        int live = 0;
        for (int g = 0; g <= n_; ++g) width_[g] = live += delta[g];
        width_[0] = width_[n_] = 0;
    }

    // Whether the unit at [start, start + period) feeds the unit right after it.
    bool feedsNext(int start, int period) const
    {
        for (int q = start + period; q < start + 2 * period; ++q)
            for (TensorId t : opAt(q).inputs) {
                const OpId p = index_.producer[t];
                if (p >= 0 && pos_[p] >= start && pos_[p] < start + period) return true;
            }
        return false;
    }

    bool scopeChangesAt(int gap) const
    {
        if (gap <= 0 || gap >= n_) return true;
        return topScope(opAt(gap - 1).name) != topScope(opAt(gap).name);
    }

    void findRepeats()
    {
        const RangeHasher hasher(exact_);
        int floor = 0;
        std::vector<int> candidates;
        for (int i = 0; i < n_;) {
            candidates.clear();
            for (int j = i; j < std::min(n_, i + kCandidateWindow); ++j)
                for (int next : {nextExact_[j], nextRefined_[j]})
                    if (next > j && i + 2 * (next - j) <= n_) candidates.push_back(next - j);
            std::sort(candidates.begin(), candidates.end());
            candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

            Repeat found;
            for (int period : candidates) {
                const u64 unit = hasher.range(i, period);
                if (hasher.range(i + period, period) != unit || !feedsNext(i, period)) continue;
                int count = 2;
                while (i + (count + 1) * period <= n_ && hasher.range(i + count * period, period) == unit &&
                       feedsNext(i + (count - 1) * period, period))
                    ++count;
                if (count * period > found.count * found.period) found = {i, period, count};
            }
            if (found.count == 0) {
                ++i;
                continue;
            }
            const Repeat chosen = phase(found, floor);
            repeats_.push_back(chosen);
            floor = chosen.end();
            i = std::max(floor, i + 1);
        }
    }

    // The periodic stretch around a found repeat may extend beyond it on both sides; among the
    // phases that keep the most whole units, take the one whose unit boundaries cut the fewest
    // live tensors, then the one agreeing most with top-level name scopes, then the earliest.
    Repeat phase(const Repeat& found, int floor) const
    {
        const int period = found.period;
        int begin = found.start, end = found.end();
        while (begin > floor && exact_[begin - 1] == exact_[begin - 1 + period]) --begin;
        while (end < n_ && exact_[end] == exact_[end - period]) ++end;

        Repeat best;
        long bestWidth = LONG_MAX;
        int bestScopes = -1;
        auto scopeScore = [&](const Repeat& r) {
            int score = 0;
            for (int j = 0; j <= r.count; ++j) score += scopeChangesAt(r.start + j * period) ? 1 : 0;
            return score;
        };
        for (int shift = 0; shift < period; ++shift) {
            const Repeat r{begin + shift, period, (end - begin - shift) / period};
            if (r.count < 2 || r.count < best.count) continue;
            long cut = 0;
            for (int j = 0; j <= r.count; ++j) cut += width_[r.start + j * period];
            if (r.count == best.count && cut > bestWidth) continue;
            if (r.count == best.count && cut == bestWidth) {
                if (bestScopes < 0) bestScopes = scopeScore(best);
                const int scopes = scopeScore(r);
                if (scopes <= bestScopes) continue;
                bestScopes = scopes;
            } else {
                bestScopes = -1;
            }
            best = r;
            bestWidth = cut;
        }
        for (int j = 0; j + 1 < best.count; ++j)
            if (!feedsNext(best.start + j * period, period)) return found;
        if (best.count < found.count) return found;
        best.lead = best.start - begin;
        best.trail = end - best.end();
        return best;
    }

    // Where a repeat's unit holds several layers of different kinds (Gemma-3: five local layers
    // and a global one), it splits at its top-level scope changes into one piece per layer, so
    // that each kind of layer becomes a class of its own: the offsets of the pieces' starts after
    // 0, or none. Only a unit that starts and ends at scope changes, whose pieces have two ops or
    // more and distinct scopes, splits: graphs without scoped names never do.
    std::vector<int> unitPieces(int start, int period) const
    {
        if (!scopeChangesAt(start) || !scopeChangesAt(start + period)) return {};
        std::vector<int> offsets;
        std::set<std::string_view> scopes{topScope(opAt(start).name)};
        int last = 0;
        for (int q = 1; q < period; ++q) {
            if (!scopeChangesAt(start + q)) continue;
            if (q - last < 2 || !scopes.insert(topScope(opAt(start + q).name)).second) return {};
            offsets.push_back(q);
            last = q;
        }
        if (period - last < 2) return {};
        return offsets;
    }

    // The units of a repeat as intervals, each split into its pieces; and the whole pieces of
    // the pattern's continuation before and after it (a partial unit), which are copies of the
    // unit's pieces. Returns where the repeat's intervals end.
    int addRepeatUnits(const Repeat& r)
    {
        const std::vector<int> pieces = unitPieces(r.start, r.period);
        std::vector<int> bounds{0};
        bounds.insert(bounds.end(), pieces.begin(), pieces.end());
        bounds.push_back(r.period);
        auto addUnit = [&](int unitStart, int from, int to) { // positions [unitStart + from, unitStart + to)
            for (size_t k = 0; k + 1 < bounds.size(); ++k)
                if (bounds[k] >= from && bounds[k + 1] <= to)
                    intervalUnits_.emplace_back(unitStart + bounds[k], bounds[k + 1] - bounds[k]);
        };
        if (pieces.empty()) {
            for (int j = 0; j < r.count; ++j) intervalUnits_.emplace_back(r.start + j * r.period, r.period);
            return r.end();
        }
        int trailEnd = r.end();
        for (size_t k = 1; k < bounds.size() && bounds[k] <= r.trail; ++k) trailEnd = r.end() + bounds[k];
        for (int j = 0; j < r.count; ++j) addUnit(r.start + j * r.period, 0, r.period);
        addUnit(r.end(), 0, trailEnd - r.end());
        return trailEnd;
    }

    // The whole pieces of the unit's last part just before a split repeat (its lead), as units;
    // returns where they begin (`r.start` when none).
    int leadPieces(const Repeat& r, int floor, std::vector<std::pair<int, int>>& out) const
    {
        const std::vector<int> pieces = unitPieces(r.start, r.period);
        int begin = r.start;
        for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
            const int at = r.start - r.period + *it;
            if (at < r.start - r.lead || at < floor) break;
            out.emplace_back(at, begin - at);
            begin = at;
        }
        std::reverse(out.begin(), out.end());
        return begin;
    }

    // Same coarse labels and the same internal edges: the unit at `start` is shaped like the one
    // at `reference` except for sizes.
    bool sameCoarseUnit(int start, int reference, int period) const
    {
        for (int q = 0; q < period; ++q) {
            if (coarse_[start + q] != coarse_[reference + q]) return false;
            const Op& a = opAt(start + q);
            const Op& b = opAt(reference + q);
            for (size_t s = 0; s < a.inputs.size(); ++s) {
                const OpId pa = index_.producer[a.inputs[s]], pb = index_.producer[b.inputs[s]];
                const int offsetA = pa >= 0 && pos_[pa] >= start && pos_[pa] < start + period ? pos_[pa] - start : -1;
                const int offsetB = pb >= 0 && pos_[pb] >= reference && pos_[pb] < reference + period ? pos_[pb] - reference : -1;
                if (offsetA != offsetB) return false;
                if (offsetA >= 0 && index_.producerSlot[a.inputs[s]] != index_.producerSlot[b.inputs[s]]) return false;
            }
        }
        return true;
    }

    // A repeat's pieces (its units, or their layers where a unit splits), by label hash and length.
    using KnownPieces = std::set<std::pair<u64, int>>;
    KnownPieces knownPieces(const RangeHasher& hasher) const
    {
        KnownPieces known;
        for (const auto& r : repeats_) {
            std::vector<int> bounds{0};
            for (int piece : unitPieces(r.start, r.period)) bounds.push_back(piece);
            bounds.push_back(r.period);
            for (size_t k = 0; k + 1 < bounds.size(); ++k)
                known.emplace(hasher.range(r.start + bounds[k], bounds[k + 1] - bounds[k]), bounds[k + 1] - bounds[k]);
        }
        return known;
    }

    // Whole scopes inside an irregular stretch with the labels of a repeat's piece (Gemma-3: a
    // local layer after a lone global one) are units of their own, so they join that piece's
    // class (classify compares op by op; the hash only proposes); the rest is cut as before.
    void cutStretch(int a, int b, const RangeHasher& hasher, const KnownPieces& known)
    {
        int segment = a;
        for (int x = a; x < b;) {
            int y = x + 1;
            while (y < b && !scopeChangesAt(y)) ++y;
            if (y - x >= 2 && scopeChangesAt(x) && scopeChangesAt(y) && known.count({hasher.range(x, y - x), y - x})) {
                cutIrregular(segment, x);
                intervalUnits_.emplace_back(x, y - x);
                segment = y;
            }
            x = y;
        }
        cutIrregular(segment, b);
    }

    void cutIntoUnits()
    {
        const RangeHasher hasher(exact_);
        const KnownPieces known = knownPieces(hasher);
        int cursor = 0;
        for (size_t r = 0; r <= repeats_.size(); ++r) {
            const Repeat* before = r > 0 ? &repeats_[r - 1] : nullptr;
            const Repeat* after = r < repeats_.size() ? &repeats_[r] : nullptr;
            int a = cursor, b = after ? after->start : n_;
            std::vector<std::pair<int, int>> tail;
            if (before)
                while (b - a >= before->period && sameCoarseUnit(a, before->start, before->period)) {
                    intervalUnits_.emplace_back(a, before->period);
                    a += before->period;
                }
            std::vector<std::pair<int, int>> lead;
            if (after) b = leadPieces(*after, a, lead);
            if (after)
                while (b - a >= after->period && sameCoarseUnit(b - after->period, after->start, after->period)) {
                    b -= after->period;
                    tail.emplace_back(b, after->period);
                }
            cutStretch(a, b, hasher, known);
            intervalUnits_.insert(intervalUnits_.end(), tail.rbegin(), tail.rend());
            intervalUnits_.insert(intervalUnits_.end(), lead.begin(), lead.end());
            if (after) cursor = addRepeatUnits(*after);
        }
        for (const auto& [start, length] : intervalUnits_) {
            Draft d;
            d.ops.assign(order_.begin() + start, order_.begin() + start + length);
            drafts_.push_back(std::move(d));
        }
        std::sort(drafts_.begin(), drafts_.end(),
                  [&](const Draft& x, const Draft& y) { return pos_[x.ops.front()] < pos_[y.ops.front()]; });
    }

    // An irregular stretch is cut at its narrowest gaps into pieces; a piece of one op joins the
    // group before it (a trailing activation, dropout or norm), multi-op pieces start groups.
    // Each group then splits into its weakly connected parts, which are convex because the group
    // is an interval of the topological order.
    void cutIrregular(int a, int b)
    {
        if (a >= b) return;
        int narrowest = INT_MAX;
        for (int g = a + 1; g < b; ++g) narrowest = std::min(narrowest, width_[g]);
        std::vector<std::pair<int, int>> groups;
        int pieceStart = a;
        for (int g = a + 1; g <= b; ++g) {
            if (g < b && width_[g] != narrowest) continue;
            const bool single = g - pieceStart == 1;
            if (!groups.empty() && single)
                groups.back().second = g;
            else
                groups.emplace_back(pieceStart, g);
            pieceStart = g;
        }
        for (const auto& [x, y] : groups) splitConnected(x, y);
    }

    void splitConnected(int x, int y)
    {
        std::vector<int> parent(static_cast<size_t>(y - x));
        std::iota(parent.begin(), parent.end(), 0);
        auto find = [&](int v) {
            while (parent[v] != v) v = parent[v] = parent[parent[v]];
            return v;
        };
        for (int q = x; q < y; ++q)
            for (TensorId t : opAt(q).inputs) {
                const OpId p = index_.producer[t];
                if (p >= 0 && pos_[p] >= x && pos_[p] < y) parent[find(pos_[p] - x)] = find(q - x);
            }
        std::vector<int> draftOfRoot(parent.size(), -1);
        for (int q = x; q < y; ++q) {
            int& slot = draftOfRoot[find(q - x)];
            if (slot < 0) {
                slot = static_cast<int>(drafts_.size());
                drafts_.emplace_back();
            }
            drafts_[slot].ops.push_back(order_[q]);
        }
    }

    // Branches that feed one variadic join (Combine, Concat) through their own operand, used by
    // nothing else, identical to each other and fed by the same ops, become sibling drafts.
    void extractSiblings()
    {
        std::vector<int> draftOfOp(static_cast<size_t>(n_), -1);
        for (size_t d = 0; d < drafts_.size(); ++d)
            for (OpId id : drafts_[d].ops) draftOfOp[id] = static_cast<int>(d);
        std::vector<int> uses(static_cast<size_t>(n_), 0);
        for (const auto& op : graph_.ops)
            for (TensorId t : op.outputs)
                uses[op.id] += graph_.tensors[t].role == TensorRole::Output ? INT_MAX / 4 : index_.consumerCount(t);
        std::vector<int> counted(static_cast<size_t>(n_), 0);
        std::vector<char> inBranch(static_cast<size_t>(n_), 0);
        Scratch scratch(graph_);

        const size_t topLevel = drafts_.size();
        for (size_t d = 0; d < topLevel; ++d) {
            bool removedAny = false;
            for (size_t k = 0; k < drafts_[d].ops.size(); ++k) {
                const OpId joinId = drafts_[d].ops[k];
                const Op& join = graph_.ops[joinId];
                if (opKindInfo(join.kind).maxInputs != -1 || join.inputs.size() < 2) continue;
                std::vector<std::vector<OpId>> branches;
                for (TensorId t : join.inputs) {
                    const OpId head = index_.producer[t];
                    if (head < 0 || head == joinId || draftOfOp[head] != static_cast<int>(d) || inBranch[head] || uses[head] != 1)
                        continue;
                    std::vector<OpId> branch{head};
                    std::vector<OpId> touched;
                    inBranch[head] = 1;
                    for (size_t k = 0; k < branch.size(); ++k)
                        for (TensorId u : graph_.ops[branch[k]].inputs) {
                            const OpId p = index_.producer[u];
                            if (p < 0 || p == joinId || draftOfOp[p] != static_cast<int>(d) || inBranch[p]) continue;
                            if (counted[p]++ == 0) touched.push_back(p);
                            if (counted[p] == uses[p]) {
                                inBranch[p] = 1;
                                branch.push_back(p);
                            }
                        }
                    for (OpId p : touched) counted[p] = 0;
                    std::sort(branch.begin(), branch.end(), [&](OpId x, OpId y) { return pos_[x] < pos_[y]; });
                    branches.push_back(std::move(branch));
                }
                for (const auto& branch : branches)
                    for (OpId id : branch) inBranch[id] = 0;
                removedAny |= groupSiblings(branches, static_cast<int>(d), scratch, inBranch);
            }
            if (removedAny) {
                auto& own = drafts_[d].ops;
                own.erase(std::remove_if(own.begin(), own.end(), [&](OpId id) { return inBranch[id] != 0; }), own.end());
            }
        }
    }

    // Marks the branches that have an identical peer (fed by the same ops) and adds them as
    // drafts under `parent`. Returns whether any was taken.
    bool groupSiblings(const std::vector<std::vector<OpId>>& branches, int parent, Scratch& scratch, std::vector<char>& inBranch)
    {
        if (branches.size() < 2) return false;
        std::vector<BlockDescription> descriptions;
        std::vector<std::vector<OpId>> feeders;
        for (const auto& branch : branches) {
            descriptions.push_back(describeBlock(graph_, index_, branch, scratch));
            std::vector<OpId> from;
            for (TensorId t : descriptions.back().inputs) from.push_back(index_.producer[t]);
            std::sort(from.begin(), from.end());
            from.erase(std::unique(from.begin(), from.end()), from.end());
            feeders.push_back(std::move(from));
        }
        std::vector<int> groupOf(branches.size(), -1);
        std::vector<int> groupSize;
        std::vector<size_t> groupRep;
        for (size_t b = 0; b < branches.size(); ++b) {
            for (size_t g = 0; g < groupRep.size() && groupOf[b] < 0; ++g) {
                const size_t r = groupRep[g];
                if (feeders[r] == feeders[b] && sameBlock(branches[r], descriptions[r], branches[b], descriptions[b]))
                    groupOf[b] = static_cast<int>(g);
            }
            if (groupOf[b] < 0) {
                groupOf[b] = static_cast<int>(groupRep.size());
                groupRep.push_back(b);
                groupSize.push_back(0);
            }
            ++groupSize[groupOf[b]];
        }
        bool taken = false;
        for (size_t b = 0; b < branches.size(); ++b) {
            if (groupSize[groupOf[b]] < 2) continue;
            taken = true;
            for (OpId id : branches[b]) inBranch[id] = 1;
            Draft d;
            d.ops = branches[b];
            d.parent = parent;
            drafts_.push_back(std::move(d));
        }
        return taken;
    }

    bool sameBlock(const std::vector<OpId>& a, const BlockDescription& da, const std::vector<OpId>& b,
                   const BlockDescription& db) const
    {
        if (a.size() != b.size() || da.codes != db.codes) return false;
        for (size_t i = 0; i < a.size(); ++i)
            if (!sameOp(graph_, graph_.ops[a[i]], graph_.ops[b[i]])) return false;
        return true;
    }

    FoldedGraph classify()
    {
        Scratch scratch(graph_);
        // Order drafts by their first op's position; remember where each parent went.
        std::vector<int> byPosition(drafts_.size());
        std::iota(byPosition.begin(), byPosition.end(), 0);
        std::stable_sort(byPosition.begin(), byPosition.end(),
                         [&](int x, int y) { return pos_[drafts_[x].ops.front()] < pos_[drafts_[y].ops.front()]; });
        std::vector<int> rank(drafts_.size());
        for (size_t r = 0; r < byPosition.size(); ++r) rank[byPosition[r]] = static_cast<int>(r);
        std::vector<Draft> sorted;
        sorted.reserve(drafts_.size());
        for (int d : byPosition) {
            sorted.push_back(std::move(drafts_[d]));
            if (sorted.back().parent >= 0) sorted.back().parent = rank[sorted.back().parent];
        }
        drafts_.swap(sorted);

        FoldedGraph folded;
        folded.classOfOp.assign(static_cast<size_t>(n_), -1);
        folded.instanceOfOp.assign(static_cast<size_t>(n_), -1);
        std::unordered_map<u64, std::vector<int>> classesByHash;
        std::vector<int> representativeDraft;
        std::vector<std::pair<int, int>> placeOfDraft(drafts_.size());
        for (size_t d = 0; d < drafts_.size(); ++d) {
            Draft& draft = drafts_[d];
            draft.description = describeBlock(graph_, index_, draft.ops, scratch);
            for (OpId id : draft.ops) draft.distinct |= options_.distinctOps.count(id) > 0;
            u64 h = draft.ops.size();
            for (OpId id : draft.ops) h = combine(h, exact_[pos_[id]]);
            for (auto c : draft.description.codes) h = combine(h, static_cast<u64>(c));
            int classId = -1;
            std::vector<int>* bucket = nullptr;
            if (!draft.distinct) {
                bucket = &classesByHash[h];
                for (int c : *bucket) {
                    const Draft& rep = drafts_[representativeDraft[c]];
                    if (sameBlock(rep.ops, rep.description, draft.ops, draft.description)) {
                        classId = c;
                        break;
                    }
                }
            }
            if (classId < 0) {
                classId = static_cast<int>(folded.classes.size());
                BlockClass block;
                block.id = classId;
                block.distinct = draft.distinct;
                folded.classes.push_back(std::move(block));
                representativeDraft.push_back(static_cast<int>(d));
                if (bucket) bucket->push_back(classId);
            }
            BlockClass& block = folded.classes[classId];
            const int instance = static_cast<int>(block.instances.size());
            for (OpId id : draft.ops) {
                folded.classOfOp[id] = classId;
                folded.instanceOfOp[id] = instance;
            }
            BlockInstance inst;
            inst.ops = draft.ops;
            inst.inputs = std::move(draft.description.inputs);
            inst.outputs = std::move(draft.description.outputs);
            block.instances.push_back(std::move(inst));
            placeOfDraft[d] = {classId, instance};
            folded.sequence.emplace_back(classId, instance);
        }
        for (auto& block : folded.classes) block.label = labelOf(block);
        buildRuns(folded, placeOfDraft);
        buildSiblings(folded, placeOfDraft);
        return folded;
    }

    void buildRuns(FoldedGraph& folded, const std::vector<std::pair<int, int>>& placeOfDraft) const
    {
        const BlockInstance* previous = nullptr;
        for (size_t d = 0; d < drafts_.size(); ++d) {
            if (drafts_[d].parent >= 0) continue;
            const auto [classId, instance] = placeOfDraft[d];
            const BlockInstance& current = folded.classes[classId].instances[instance];
            bool chained = false;
            if (previous && !folded.runs.empty() && folded.runs.back().classId == classId)
                for (TensorId t : previous->outputs)
                    chained |= std::find(current.inputs.begin(), current.inputs.end(), t) != current.inputs.end();
            if (chained)
                ++folded.runs.back().count;
            else
                folded.runs.push_back({classId, instance, 1});
            previous = &current;
        }
    }

    void buildSiblings(FoldedGraph& folded, const std::vector<std::pair<int, int>>& placeOfDraft) const
    {
        std::map<std::pair<int, int>, size_t> groupOf; // (parent draft, class) -> group
        for (size_t d = 0; d < drafts_.size(); ++d) {
            const int parent = drafts_[d].parent;
            if (parent < 0) continue;
            const auto [classId, instance] = placeOfDraft[d];
            auto [it, inserted] = groupOf.try_emplace({parent, classId}, folded.siblings.size());
            if (inserted) {
                SiblingGroup group;
                group.classId = classId;
                group.parentClass = placeOfDraft[parent].first;
                group.parentInstance = placeOfDraft[parent].second;
                folded.siblings.push_back(std::move(group));
            }
            folded.siblings[it->second].instances.push_back(instance);
        }
    }

    // The scope shared by all ops of an instance, generalized over the instances ("layers.*");
    // a one-op block is named by its op. Without shared scopes: the kinds of the first and last op.
    std::string labelOf(const BlockClass& block) const
    {
        std::vector<std::string> label;
        for (size_t i = 0; i < block.instances.size(); ++i) {
            const auto& ops = block.instances[i].ops;
            std::string_view common =
                ops.size() == 1 ? std::string_view(graph_.ops[ops.front()].name) : scopeOf(graph_.ops[ops.front()].name);
            for (size_t k = 1; k < ops.size() && !common.empty(); ++k)
                common = commonScope(common, scopeOf(graph_.ops[ops[k]].name));
            const auto parts = splitScope(common);
            if (i == 0) {
                label.assign(parts.begin(), parts.end());
            } else {
                label.resize(std::min(label.size(), parts.size()));
                for (size_t k = 0; k < label.size(); ++k) label[k] = generalize(label[k], parts[k]);
            }
            while (!label.empty() && label.back() == "*") label.pop_back();
            if (label.empty()) break;
        }
        std::string text;
        for (const auto& part : label) text += (text.empty() ? "" : "/") + part;
        if (!text.empty()) return text;
        const auto& ops = block.instances.front().ops;
        text = std::string(opKindName(graph_.ops[ops.front()].kind));
        if (ops.size() > 1) text += ".." + std::string(opKindName(graph_.ops[ops.back()].kind));
        return text;
    }
};

} // namespace

FoldedGraph foldGraph(const Graph& graph, const FoldOptions& options)
{
    for (size_t i = 0; i < graph.ops.size(); ++i)
        if (graph.ops[i].id != static_cast<OpId>(i))
            throw InputError("op '" + graph.ops[i].name + "': id " + std::to_string(graph.ops[i].id) + " is not its index " +
                             std::to_string(i));
    Folder folder(graph, options);
    return folder.run();
}

} // namespace tp
