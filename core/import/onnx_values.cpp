// Pure helpers of the ONNX importer (onnx_importer.h): element types, constant tensors,
// numpy broadcasting, node attributes, and the equations the mapped ops carry.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "../util/error.h"
#include "onnx_importer.h"

namespace tp::onnx_detail {

// ---------------------------------------------------------------------------------------------
// Element types and small helpers

bool isFloatType(int type)
{
    return type == onnx::TensorProto_DataType_FLOAT || type == onnx::TensorProto_DataType_DOUBLE ||
           type == onnx::TensorProto_DataType_FLOAT16 || type == onnx::TensorProto_DataType_BFLOAT16;
}

bool isIntegerType(int type)
{
    switch (type) {
    case onnx::TensorProto_DataType_UINT8:
    case onnx::TensorProto_DataType_INT8:
    case onnx::TensorProto_DataType_UINT16:
    case onnx::TensorProto_DataType_INT16:
    case onnx::TensorProto_DataType_INT32:
    case onnx::TensorProto_DataType_INT64:
    case onnx::TensorProto_DataType_UINT32:
    case onnx::TensorProto_DataType_UINT64:
    case onnx::TensorProto_DataType_BOOL:
        return true;
    default:
        return false;
    }
}

// TP Studio has no f64 or 16-bit integers: doubles import as f32 and narrow integers widen.
std::optional<DType> dtypeOf(int type)
{
    switch (type) {
    case onnx::TensorProto_DataType_FLOAT:
    case onnx::TensorProto_DataType_DOUBLE:
        return DType::F32;
    case onnx::TensorProto_DataType_FLOAT16:
        return DType::F16;
    case onnx::TensorProto_DataType_BFLOAT16:
        return DType::BF16;
    case onnx::TensorProto_DataType_INT64:
    case onnx::TensorProto_DataType_UINT64:
        return DType::I64;
    case onnx::TensorProto_DataType_INT32:
    case onnx::TensorProto_DataType_UINT32:
    case onnx::TensorProto_DataType_INT16:
    case onnx::TensorProto_DataType_UINT16:
        return DType::I32;
    case onnx::TensorProto_DataType_INT8:
    case onnx::TensorProto_DataType_UINT8:
        return DType::I8;
    case onnx::TensorProto_DataType_BOOL:
        return DType::Bool;
    default:
        return std::nullopt;
    }
}

std::optional<std::int64_t> elementCount(const Shape& dims)
{
    std::int64_t n = 1;
    for (auto d : dims) {
        if (d < 0) return std::nullopt;
        if (d > 0 && n > std::numeric_limits<std::int64_t>::max() / d) return std::nullopt;
        n *= d;
    }
    return n;
}

std::int64_t saturatingInt(double v)
{
    if (std::isnan(v)) return 0;
    if (v >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
    if (v <= -9.2e18) return std::numeric_limits<std::int64_t>::min();
    return static_cast<std::int64_t>(v);
}

// Normalises a possibly negative axis; nullopt when out of range.
std::optional<size_t> normalAxis(std::int64_t axis, size_t rank)
{
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return std::nullopt;
    return static_cast<size_t>(axis);
}

bool smallEnough(const Shape& dims)
{
    auto c = elementCount(dims);
    return c && *c <= kMaxConstElements && dims.size() <= kMaxRank;
}

// ---------------------------------------------------------------------------------------------
// Constant tensors

template <typename T>
T loadRaw(const char* p)
{
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// The values of a tensor proto, when small and stored inline; nullopt otherwise.
std::optional<ConstValue> readTensor(const onnx::TensorProto& t)
{
    Shape dims(t.dims().begin(), t.dims().end());
    if (dims.size() > kMaxRank) return std::nullopt;
    const auto n = elementCount(dims);
    if (!n || *n > kMaxConstElements) return std::nullopt;
    if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) return std::nullopt;
    const int type = t.data_type();
    ConstValue v = ConstValue::make(dims, isFloatType(type));
    const auto count = static_cast<size_t>(*n);
    const std::string& raw = t.raw_data();
    auto fromRaw = [&](size_t width, auto decode) {
        if (raw.size() != count * width) return false;
        for (size_t i = 0; i < count; ++i) decode(i, raw.data() + i * width);
        return true;
    };
    const bool hasRaw = t.has_raw_data();
    switch (type) {
    case onnx::TensorProto_DataType_FLOAT:
        if (hasRaw)
            return fromRaw(4, [&](size_t i, const char* p) { v.reals[i] = loadRaw<float>(p); }) ? std::optional(v) : std::nullopt;
        if (static_cast<size_t>(t.float_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.reals[i] = t.float_data(static_cast<int>(i));
        return v;
    case onnx::TensorProto_DataType_DOUBLE:
        if (hasRaw)
            return fromRaw(8, [&](size_t i, const char* p) { v.reals[i] = loadRaw<double>(p); }) ? std::optional(v)
                                                                                                 : std::nullopt;
        if (static_cast<size_t>(t.double_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.reals[i] = t.double_data(static_cast<int>(i));
        return v;
    case onnx::TensorProto_DataType_INT64:
        if (hasRaw)
            return fromRaw(8, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::int64_t>(p); }) ? std::optional(v)
                                                                                                      : std::nullopt;
        if (static_cast<size_t>(t.int64_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.ints[i] = t.int64_data(static_cast<int>(i));
        return v;
    case onnx::TensorProto_DataType_UINT64:
    case onnx::TensorProto_DataType_UINT32:
        if (hasRaw) {
            const size_t width = type == onnx::TensorProto_DataType_UINT64 ? 8 : 4;
            return fromRaw(width,
                           [&](size_t i, const char* p) {
                               v.ints[i] = width == 8 ? saturatingInt(static_cast<double>(loadRaw<std::uint64_t>(p)))
                                                      : static_cast<std::int64_t>(loadRaw<std::uint32_t>(p));
                           })
                       ? std::optional(v)
                       : std::nullopt;
        }
        if (static_cast<size_t>(t.uint64_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.ints[i] = saturatingInt(static_cast<double>(t.uint64_data(static_cast<int>(i))));
        return v;
    case onnx::TensorProto_DataType_INT32:
    case onnx::TensorProto_DataType_INT16:
    case onnx::TensorProto_DataType_UINT16:
    case onnx::TensorProto_DataType_INT8:
    case onnx::TensorProto_DataType_UINT8:
    case onnx::TensorProto_DataType_BOOL:
        if (hasRaw) {
            switch (type) {
            case onnx::TensorProto_DataType_INT32:
                return fromRaw(4, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::int32_t>(p); }) ? std::optional(v)
                                                                                                          : std::nullopt;
            case onnx::TensorProto_DataType_INT16:
                return fromRaw(2, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::int16_t>(p); }) ? std::optional(v)
                                                                                                          : std::nullopt;
            case onnx::TensorProto_DataType_UINT16:
                return fromRaw(2, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::uint16_t>(p); }) ? std::optional(v)
                                                                                                           : std::nullopt;
            case onnx::TensorProto_DataType_INT8:
                return fromRaw(1, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::int8_t>(p); }) ? std::optional(v)
                                                                                                         : std::nullopt;
            default:
                return fromRaw(1, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::uint8_t>(p); }) ? std::optional(v)
                                                                                                          : std::nullopt;
            }
        }
        if (static_cast<size_t>(t.int32_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.ints[i] = t.int32_data(static_cast<int>(i));
        return v;
    default:
        return std::nullopt; // f16, bf16, strings, complex: shape only
    }
}

// For each element of `out`, the flat index of the element of `in` it reads under numpy
// broadcasting. The caller has checked that `in` broadcasts to `out`.
std::vector<size_t> broadcastIndex(const Shape& in, const Shape& out)
{
    const size_t n = static_cast<size_t>(elementCount(out).value_or(0));
    std::vector<size_t> map(n, 0);
    const size_t offset = out.size() - in.size();
    std::vector<size_t> inStride(out.size(), 0);
    size_t stride = 1;
    for (size_t d = in.size(); d-- > 0;) {
        inStride[offset + d] = in[d] == 1 ? 0 : stride;
        stride *= static_cast<size_t>(in[d]);
    }
    std::vector<std::int64_t> counter(out.size(), 0);
    size_t flat = 0;
    for (size_t i = 0; i < n; ++i) {
        map[i] = flat;
        for (size_t d = out.size(); d-- > 0;) {
            flat += inStride[d];
            if (++counter[d] < out[d]) break;
            flat -= inStride[d] * static_cast<size_t>(counter[d]);
            counter[d] = 0;
        }
    }
    return map;
}

std::optional<Shape> broadcastShapes(const std::vector<const Shape*>& shapes)
{
    size_t rank = 0;
    for (auto* s : shapes) rank = std::max(rank, s->size());
    Shape out(rank, 1);
    for (auto* s : shapes)
        for (size_t d = 0; d < s->size(); ++d) {
            auto& o = out[rank - s->size() + d];
            const auto v = (*s)[d];
            if (v == o || v == 1) continue;
            if (o != 1) return std::nullopt;
            o = v;
        }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Attributes

const onnx::AttributeProto* findAttr(const onnx::NodeProto* n, std::string_view name)
{
    if (!n) return nullptr;
    for (const auto& a : n->attribute())
        if (a.name() == name) return &a;
    return nullptr;
}

std::optional<std::int64_t> attrInt(const onnx::NodeProto* n, std::string_view name)
{
    const auto* a = findAttr(n, name);
    if (!a || a->type() != onnx::AttributeProto_AttributeType_INT) return std::nullopt;
    return a->i();
}

std::optional<std::vector<std::int64_t>> attrInts(const onnx::NodeProto* n, std::string_view name)
{
    const auto* a = findAttr(n, name);
    if (!a || a->type() != onnx::AttributeProto_AttributeType_INTS) return std::nullopt;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<std::string> attrString(const onnx::NodeProto* n, std::string_view name)
{
    const auto* a = findAttr(n, name);
    if (!a || a->type() != onnx::AttributeProto_AttributeType_STRING) return std::nullopt;
    return a->s();
}

EinsumTerms parseEinsumEquation(const std::string& text)
{
    EinsumTerms e;
    std::string eq;
    for (char c : text)
        if (c != ' ' && c != '\t') eq += c;
    if (eq.find("...") != std::string::npos) {
        e.problem = "an Einsum with an ellipsis ('...')";
        return e;
    }
    const auto arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::string term;
    for (size_t i = 0; i <= lhs.size(); ++i) {
        if (i == lhs.size() || lhs[i] == ',') {
            e.inputs.push_back(term);
            term.clear();
        } else {
            term += lhs[i];
        }
    }
    std::map<char, int> uses;
    for (const auto& t : e.inputs)
        for (char c : t) ++uses[c];
    if (arrow == std::string::npos) {
        for (const auto& [c, count] : uses)
            if (count == 1) e.output += c;
    } else {
        e.output = eq.substr(arrow + 2);
    }
    for (const auto& t : e.inputs) {
        for (char c : t)
            if (!std::isalpha(static_cast<unsigned char>(c)))
                e.problem = "Einsum equation '" + text + "' has '" + std::string(1, c) + "' where a letter belongs";
        for (size_t i = 0; i < t.size() && e.problem.empty(); ++i)
            if (t.find(t[i], i + 1) != std::string::npos) e.problem = "an Einsum that takes a diagonal ('" + t + "')";
    }
    for (char c : e.output)
        if (!uses.count(c) && e.problem.empty())
            e.problem = "Einsum equation '" + text + "': output letter '" + std::string(1, c) + "' is in no operand";
    return e;
}

// ---------------------------------------------------------------------------------------------
// Equations

// A reshape as an equation over "atoms": the coarsest common refinement of both shapes, e.g.
// [4,2,256] -> [4,16,32] is "sb(hd)->s(bh)d". nullopt when sizes do not nest ([2,3] -> [3,2]).
std::optional<std::string> reshapeByAtoms(const Shape& in, const Shape& out)
{
    static constexpr std::string_view pool = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    std::string lhs, rhs, atomsIn, atomsOut;
    size_t i = 0, o = 0, next = 0;
    std::int64_t restIn = 0, restOut = 0; // what is left of the current dims (0: none open)
    auto term = [](const std::string& atoms) { return atoms.size() == 1 ? atoms : "(" + atoms + ")"; };
    while (true) {
        if (restIn == 0 && i < in.size()) {
            if (in[i] == 1) {
                lhs += '1';
                ++i;
                continue;
            }
            restIn = in[i];
            atomsIn.clear();
        }
        if (restOut == 0 && o < out.size()) {
            if (out[o] == 1) {
                rhs += '1';
                ++o;
                continue;
            }
            restOut = out[o];
            atomsOut.clear();
        }
        if (restIn == 0 && restOut == 0) break;
        if (restIn <= 0 || restOut <= 0 || next >= pool.size()) return std::nullopt;
        const std::int64_t atom = std::min(restIn, restOut);
        if (std::max(restIn, restOut) % atom != 0) return std::nullopt;
        const char label = pool[next++];
        atomsIn += label;
        atomsOut += label;
        restIn /= atom;
        restOut /= atom;
        if (restIn == 1) {
            lhs += term(atomsIn);
            ++i;
            restIn = 0;
        }
        if (restOut == 1) {
            rhs += term(atomsOut);
            ++o;
            restOut = 0;
        }
    }
    return lhs + "->" + rhs;
}

std::string letters(size_t count, std::string_view avoid)
{
    static constexpr std::string_view pool = "bcdeghijopqrstuvwxyzABCDEFGHIJ";
    std::string out;
    for (char c : pool) {
        if (out.size() == count) break;
        if (avoid.find(c) == std::string_view::npos) out.push_back(c);
    }
    return out;
}

// numpy matmul semantics as an equation: batch dims broadcast, rank-1 operands promoted.
std::string matmulEquation(const Shape& a, const Shape& b, const Shape& out)
{
    const bool hasM = a.size() >= 2, hasN = b.size() >= 2;
    const size_t own = (hasM ? 1u : 0u) + (hasN ? 1u : 0u);
    if (out.size() < own || out.size() - own < std::max(a.size(), b.size()) - std::min<size_t>(2, std::max(a.size(), b.size())))
        throw InputError("the output rank does not fit the operands");
    const size_t batchRank = out.size() - own;
    const std::string batch = letters(batchRank, "mkn");
    auto side = [&](const Shape& s, size_t batchDims) {
        std::string eq;
        for (size_t j = 0; j < batchDims; ++j) {
            const size_t o = batchRank - batchDims + j;
            eq += (s[j] == 1 && out[o] != 1) ? '1' : batch[o];
        }
        return eq;
    };
    std::string eq = side(a, hasM ? a.size() - 2 : 0) + (hasM ? "mk" : "k") + ",";
    eq += side(b, hasN ? b.size() - 2 : 0) + (hasN ? "kn" : "k") + "->" + batch;
    if (hasM) eq += 'm';
    if (hasN) eq += 'n';
    return eq;
}

} // namespace tp::onnx_detail
