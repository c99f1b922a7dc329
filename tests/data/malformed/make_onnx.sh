#!/usr/bin/env bash
# Encodes the hand-written ONNX models of onnx_src/*.textproto (protobuf text format) into the
# malformed .onnx inputs beside this script, with protoc and the onnx.proto of Debian's libonnx-dev.
# onnx_truncated.onnx is the valid model cut in the middle of a message; onnx_garbage.onnx is
# bytes that are not a protobuf at all. The committed files are what tst_malformed reads.
set -euo pipefail
cd "$(dirname "$0")"
proto=/usr/include/onnx/onnx.proto
encode() { protoc -I"$(dirname "$proto")" --encode=onnx.ModelProto "$proto" < "$1"; }
for src in onnx_src/*.textproto; do
  name=$(basename "$src" .textproto)
  [ "$name" = onnx_valid ] && continue
  encode "$src" > "$name.onnx"
done
encode onnx_src/onnx_valid.textproto > /tmp/tp_onnx_valid.$$
head -c $(( $(stat -c %s /tmp/tp_onnx_valid.$$) / 2 )) /tmp/tp_onnx_valid.$$ > onnx_truncated.onnx
rm -f /tmp/tp_onnx_valid.$$
printf 'PK\003\004 this is a zip header, not an ONNX model\n' > onnx_garbage.onnx
