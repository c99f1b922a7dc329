#include "graph_json.h"

#include <cstdint>

#include "../graph/opkinds.h"
#include "../graph/validate.h"
#include "../util/error.h"
#include "../util/json_reader.h"

namespace tp {

using nlohmann::json;

namespace {

json attrToJson(const AttrValue& value)
{
    return std::visit([](const auto& v) { return json(v); }, value);
}

} // namespace

json graphToJson(const Graph& g)
{
    json doc = json::object();
    doc["format"] = "tpstudio.graph";
    doc["version"] = kGraphFormatVersion;
    doc["name"] = g.name;
    json tensors = json::array();
    for (const auto& t : g.tensors) {
        tensors.push_back({{"id", t.id},
                           {"name", t.name},
                           {"shape", t.shape},
                           {"dtype", std::string(dtypeName(t.dtype))},
                           {"role", std::string(tensorRoleName(t.role))}});
    }
    doc["tensors"] = std::move(tensors);
    json ops = json::array();
    for (const auto& o : g.ops) {
        json op = {{"id", o.id},
                   {"name", o.name},
                   {"kind", std::string(opKindName(o.kind))},
                   {"inputs", o.inputs},
                   {"outputs", o.outputs}};
        if (!o.einsum.empty()) op["einsum"] = o.einsum;
        if (!o.attrs.empty()) {
            json attrs = json::object();
            for (const auto& [k, v] : o.attrs) attrs[k] = attrToJson(v);
            op["attrs"] = std::move(attrs);
        }
        ops.push_back(std::move(op));
    }
    doc["ops"] = std::move(ops);
    return doc;
}

std::string writeGraphJson(const Graph& graph) { return graphToJson(graph).dump(2) + "\n"; }

namespace {

AttrValue attrValue(const JsonReader& r, const json& v, const std::string& path)
{
    if (v.is_number_integer()) return r.integer(v, path);
    if (v.is_number_float()) return v.get<double>();
    if (v.is_string()) return v.get<std::string>();
    if (v.is_array()) {
        std::vector<std::int64_t> out;
        for (size_t i = 0; i < v.size(); ++i) out.push_back(r.integer(v[i], path + "/" + std::to_string(i)));
        return out;
    }
    r.fail(path, "must be an integer, number, string or list of integers, not " + std::string(v.type_name()));
}

constexpr size_t kMaxElements = 10'000'000; // tensors or ops in one graph
constexpr size_t kMaxRank = 16;

} // namespace

Graph graphFromJson(const json& doc, const std::string& origin)
{
    const JsonReader r(origin);
    r.envelope(doc, "graph", "tpstudio.graph", kGraphFormatVersion);

    Graph g;
    g.name = doc.contains("name") ? r.string(doc, "", "name") : origin;
    const json& tensors = r.field(doc, "", "tensors");
    if (!tensors.is_array()) r.fail("/tensors", "must be an array, not " + std::string(tensors.type_name()));
    if (tensors.size() > kMaxElements) r.fail("/tensors", "has more than 10,000,000 entries");
    for (size_t i = 0; i < tensors.size(); ++i) {
        const std::string p = "/tensors/" + std::to_string(i);
        const json& t = tensors[i];
        Tensor tensor;
        // Compared before narrowing to TensorId, so that 2^32 is not taken for 0.
        const std::int64_t tensorId = r.integer(r.field(t, p, "id"), p + "/id");
        if (tensorId != static_cast<std::int64_t>(i))
            r.fail(p + "/id", "is " + std::to_string(tensorId) + ", expected " + std::to_string(i) + " (ids are positions)");
        tensor.id = static_cast<TensorId>(tensorId);
        tensor.name = r.string(t, p, "name");
        tensor.shape = r.intList(t, p, "shape");
        if (tensor.shape.size() > kMaxRank)
            r.fail(p + "/shape", "has rank " + std::to_string(tensor.shape.size()) + "; at most 16 dims");
        std::int64_t elements = 1;
        for (size_t d = 0; d < tensor.shape.size(); ++d) {
            const std::int64_t dim = tensor.shape[d];
            if (dim <= 0) r.fail(p + "/shape/" + std::to_string(d), "is " + std::to_string(dim) + "; dims must be positive");
            if (elements > INT64_MAX / dim)
                r.fail(p + "/shape", "tensor '" + tensor.name + "' has more elements than fit in 64 bits");
            elements *= dim;
        }
        const std::string dtype = r.string(t, p, "dtype");
        auto dt = parseDType(dtype);
        if (!dt) r.fail(p + "/dtype", "unknown dtype '" + dtype + "' (f32, f16, bf16, f8, i64, i32, i8, bool)");
        tensor.dtype = *dt;
        const std::string role = r.string(t, p, "role");
        auto ro = parseTensorRole(role);
        if (!ro) r.fail(p + "/role", "unknown role '" + role + "' (input, weight, activation, output)");
        tensor.role = *ro;
        g.tensors.push_back(std::move(tensor));
    }
    const json& ops = r.field(doc, "", "ops");
    if (!ops.is_array()) r.fail("/ops", "must be an array, not " + std::string(ops.type_name()));
    if (ops.size() > kMaxElements) r.fail("/ops", "has more than 10,000,000 entries");
    for (size_t i = 0; i < ops.size(); ++i) {
        const std::string p = "/ops/" + std::to_string(i);
        const json& o = ops[i];
        Op op;
        const std::int64_t opId = r.integer(r.field(o, p, "id"), p + "/id");
        if (opId != static_cast<std::int64_t>(i))
            r.fail(p + "/id", "is " + std::to_string(opId) + ", expected " + std::to_string(i) + " (ids are positions)");
        op.id = static_cast<OpId>(opId);
        op.name = r.string(o, p, "name");
        const std::string kind = r.string(o, p, "kind");
        auto k = parseOpKind(kind);
        if (!k) r.fail(p + "/kind", "unknown op kind '" + kind + "' in op '" + op.name + "'");
        op.kind = *k;
        for (auto [key, list] : {std::pair{"inputs", &op.inputs}, std::pair{"outputs", &op.outputs}}) {
            const auto ids = r.intList(o, p, key);
            for (size_t j = 0; j < ids.size(); ++j) {
                if (ids[j] < 0 || ids[j] >= static_cast<std::int64_t>(g.tensors.size()))
                    r.fail(p + "/" + key + "/" + std::to_string(j),
                           "op '" + op.name + "' names tensor " + std::to_string(ids[j]) + ", but tensor ids run from 0 to " +
                               std::to_string(static_cast<std::int64_t>(g.tensors.size()) - 1));
                list->push_back(static_cast<TensorId>(ids[j]));
            }
        }
        if (o.contains("einsum")) op.einsum = r.string(o, p, "einsum");
        if (o.contains("attrs")) {
            const json& attrs = o["attrs"];
            if (!attrs.is_object()) r.fail(p + "/attrs", "must be an object, not " + std::string(attrs.type_name()));
            for (auto it = attrs.begin(); it != attrs.end(); ++it)
                op.attrs[it.key()] = attrValue(r, it.value(), p + "/attrs/" + it.key());
        }
        g.ops.push_back(std::move(op));
    }
    if (g.ops.empty()) r.fail("/ops", "is empty; a graph needs at least one op");
    try {
        validateGraph(g);
    } catch (const InputError& e) {
        throw InputError(origin + ": " + e.what());
    }
    return g;
}

Graph readGraphJson(const std::string& text, const std::string& origin)
{
    const json doc = parseJsonText(text, origin);
    return graphFromJson(doc, origin);
}

} // namespace tp
