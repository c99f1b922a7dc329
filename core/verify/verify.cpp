#include "verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "../graph/opkinds.h"
#include "../graph/signature.h"
#include "../mesh/mesh.h"
#include "../models/models.h"
#include "../sharding/strategy.h"
#include "../plan/plan.h"
#include "../util/error.h"
#include "../util/json_reader.h"
#include "executor.h"

namespace tp::verify {

namespace {

using nlohmann::json;

// ---- Shrinking -----------------------------------------------------------------------------

std::int64_t intOr(const json& c, const char* key, std::int64_t fallback)
{
    return c.contains(key) && c[key].is_number_integer() ? c[key].get<std::int64_t>() : fallback;
}

// ---- The plan as a runtime reads it ---------------------------------------------------------

struct PlannedOp {
    std::string strategy;
    std::string einsum;
    std::string representative; ///< the op of the block's first instance at the same position
};

struct ListedKey {
    std::string at, kind, axis, phase;
    auto operator<=>(const ListedKey&) const = default;
};

// Device coordinates on the mesh, axis 0 outermost.
std::vector<int> coordsOf(int device, const Mesh& mesh)
{
    std::vector<int> c(mesh.axes.size());
    for (size_t a = mesh.axes.size(); a-- > 0;) {
        c[a] = device % mesh.axes[a].size;
        device /= mesh.axes[a].size;
    }
    return c;
}

int deviceOf(const std::vector<int>& coords, const Mesh& mesh)
{
    int d = 0;
    for (size_t a = 0; a < mesh.axes.size(); ++a) d = d * mesh.axes[a].size + coords[a];
    return d;
}

// The loop ranges a device computes under a strategy: loop l split over axes (major first)
// into P pieces; the device's piece is its mixed-radix coordinate over those axes.
std::vector<Range> deviceLoops(const Signature& sig, const OpStrategy& st, const std::vector<int>& coords, const Mesh& mesh)
{
    std::vector<Range> r;
    for (size_t l = 0; l < sig.loops.size(); ++l) {
        std::int64_t pieces = 1, piece = 0;
        for (int a : st.loopAxes[l]) {
            pieces *= mesh.axes[static_cast<size_t>(a)].size;
            piece = piece * mesh.axes[static_cast<size_t>(a)].size + coords[static_cast<size_t>(a)];
        }
        const std::int64_t len = sig.loops[l].size / pieces;
        r.push_back({piece * len, (piece + 1) * len});
    }
    return r;
}

std::string rangesText(const std::vector<Range>& r)
{
    std::string s = "[";
    for (size_t d = 0; d < r.size(); ++d) s += (d ? "," : "") + std::to_string(r[d].lo) + ":" + std::to_string(r[d].hi);
    return s + "]";
}

std::string coordsText(const std::vector<int>& c, const Mesh& mesh)
{
    std::string s = "(";
    for (size_t a = 0; a < c.size(); ++a) s += (a ? "," : "") + mesh.axes[a].name + "=" + std::to_string(c[a]);
    return s + ")";
}

std::uint64_t fnv1a(const std::string& text, std::uint64_t seed)
{
    std::uint64_t h = 1469598103934665603ull ^ seed;
    for (unsigned char ch : text) {
        h ^= ch;
        h *= 1099511628211ull;
    }
    return h;
}

bool isInteger(DType t) { return t == DType::I64 || t == DType::I32 || t == DType::I8 || t == DType::Bool; }

// Random contents of a graph input or weight. Integer tensors (token ids, labels, buckets) take
// values below the smallest lookup or normalised loop they feed.
Block randomTensor(const Graph& g, TensorId t, const std::vector<Signature>& sigs,
                   const std::vector<std::vector<OpId>>& consumers, std::uint64_t seed)
{
    const auto& tensor = g.tensor(t);
    std::vector<Range> full;
    for (auto d : tensor.shape) full.push_back({0, d});
    Block b = Block::zeros(full);
    std::mt19937_64 rng(fnv1a(tensor.name, seed));
    if (isInteger(tensor.dtype)) {
        std::int64_t range = 1 << 20;
        for (OpId c : consumers[static_cast<size_t>(t)])
            for (const auto& l : sigs[static_cast<size_t>(c)].loops)
                if (l.role == DimRole::Gather || l.role == DimRole::ReducedNonlinear) range = std::min(range, l.size);
        std::uniform_int_distribution<std::int64_t> dist(0, range - 1);
        for (auto& v : b.data) v = static_cast<float>(dist(rng));
    } else {
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (auto& v : b.data) v = dist(rng);
    }
    return b;
}

struct Failure {
    std::string op, message;
};

// The sharded run's state and its collectives.
class ShardedRun {
public:
    ShardedRun(const Mesh& mesh, const std::map<ListedKey, int>& listed, VerifyReport& report) :
        mesh_(mesh),
        listed_(listed),
        report_(report),
        devices_(mesh.devices())
    {
        for (int d = 0; d < devices_; ++d) coords_.push_back(coordsOf(d, mesh));
    }

    int devices() const { return devices_; }
    const std::vector<int>& coords(int d) const { return coords_[static_cast<size_t>(d)]; }

    // Devices of d's group along axis a, ordered by their coordinate on a.
    std::vector<int> group(int d, int a) const
    {
        std::vector<int> g;
        auto c = coords(d);
        for (int k = 0; k < mesh_.axes[static_cast<size_t>(a)].size; ++k) {
            c[static_cast<size_t>(a)] = k;
            g.push_back(deviceOf(c, mesh_));
        }
        return g;
    }

    /// Brings every device's copy of a producer's output into the ranges the consumer needs,
    /// performing only collectives listed for `phase` after `rep`. Returns notes about
    /// reductions that were skipped. In the backward phase the blocks are gradients flowing from
    /// a consumer to the producer, and `consumer` is the producer that needs them.
    std::vector<std::string> reshard(std::vector<Block>& blocks, const std::vector<std::vector<Range>>& need,
                                     const std::string& tensor, const std::string& producer, const std::string& rep,
                                     const std::string& consumer, const char* phase = "forward")
    {
        const bool backward = std::string(phase) == "backward";
        const std::string what = backward             ? "the gradient of '" + tensor + "' (output of '" + producer + "')"
                                 : tensor == producer ? "the output of '" + producer + "'"
                                                      : "'" + tensor + "' (from '" + producer + "')";
        const std::string before = backward ? "backward, at '" + consumer + "': " : "before '" + consumer + "': ";
        std::vector<std::string> notes;
        for (int a = 0; a < static_cast<int>(mesh_.axes.size()); ++a) {
            const AxisMask bit = AxisMask{1} << a;
            if (!(blocks[0].partial & bit)) continue;
            const std::string axis = mesh_.axes[static_cast<size_t>(a)].name;
            const int dim = listed(rep, "reduce-scatter", axis, phase) ? reduceScatterDim(blocks, need, a) : -1;
            if (dim >= 0) {
                reduceScatter(blocks, a, dim);
                perform(rep, "reduce-scatter", axis, phase);
            } else if (listed(rep, "all-reduce", axis, phase)) {
                allReduce(blocks, a);
                perform(rep, "all-reduce", axis, phase);
            } else {
                // A runtime that does not reduce hands each device its own partial sum.
                for (auto& b : blocks) b.partial &= ~bit;
                const std::string line = what + " is partial over " + axis + " but the plan lists no " + phase +
                                         " all-reduce or reduce-scatter over " + axis + " after '" + rep + "'";
                notes.push_back(line);
                report_.missing.push_back(before + line);
            }
        }
        for (int guard = 0;; ++guard) {
            int lacking = -1;
            for (int d = 0; d < devices_ && lacking < 0; ++d)
                if (!blocks[static_cast<size_t>(d)].covers(need[static_cast<size_t>(d)])) lacking = d;
            if (lacking < 0) break;
            int axis = -1, dim = -1;
            for (int a = static_cast<int>(mesh_.axes.size()); a-- > 0 && axis < 0;)
                for (size_t e = 0; e < need[0].size() && axis < 0; ++e)
                    if (gatherable(blocks, a, e, lacking)) {
                        axis = a;
                        dim = static_cast<int>(e);
                    }
            const auto& b = blocks[static_cast<size_t>(lacking)];
            std::vector<Range> held;
            for (size_t e = 0; e < b.size.size(); ++e) held.push_back({b.start[e], b.start[e] + b.size[e]});
            const std::string where = "device " + coordsText(coords(lacking), mesh_) + " holds " + rangesText(held) + " of " +
                                      what + " but needs " + rangesText(need[static_cast<size_t>(lacking)]);
            if (axis < 0 || guard > 16) throw Failure{consumer, where + "; no collective can bring it"};
            const std::string axisName = mesh_.axes[static_cast<size_t>(axis)].name;
            const char* kind = listed(rep, "all-gather", axisName, phase)   ? "all-gather"
                               : listed(rep, "all-to-all", axisName, phase) ? "all-to-all"
                                                                            : nullptr;
            if (!kind) {
                const std::string line = where + "; the plan lists no " + phase + " all-gather or all-to-all over " + axisName +
                                         " after '" + rep + "'";
                report_.missing.push_back(before + line);
                throw Failure{consumer, line};
            }
            // An all-to-all moves the split from this dim to another: the gathered dim is whole
            // afterwards and the consumer reads its slice of the other dim locally.
            allGather(blocks, axis, static_cast<size_t>(dim));
            perform(rep, kind, axisName, phase);
        }
        return notes;
    }

    bool listed(const std::string& at, const char* kind, const std::string& axis, const char* phase) const
    {
        return listed_.count(ListedKey{at, kind, axis, phase}) > 0;
    }
    void perform(const std::string& at, const char* kind, const std::string& axis, const char* phase)
    {
        ++report_.collectivesPerformed;
        for (auto& c : report_.collectives)
            if (c.at == at && c.kind == kind && c.axis == axis && c.phase == phase) ++c.performed;
    }

    void allReduce(std::vector<Block>& blocks, int a) const
    {
        std::vector<Block> out = blocks;
        for (int d = 0; d < devices_; ++d) {
            auto& target = out[static_cast<size_t>(d)];
            std::fill(target.data.begin(), target.data.end(), 0.0f);
            for (int peer : group(d, a)) {
                const auto& src = blocks[static_cast<size_t>(peer)];
                if (src.start != target.start || src.size != target.size)
                    throw std::logic_error("all-reduce over blocks of different ranges");
                for (size_t k = 0; k < src.data.size(); ++k) target.data[k] += src.data[k];
            }
            target.partial &= ~(AxisMask{1} << a);
        }
        blocks = std::move(out);
    }

private:
    // The dim along which a reduce-scatter over axis a leaves every device what it needs.
    int reduceScatterDim(const std::vector<Block>& blocks, const std::vector<std::vector<Range>>& need, int a) const
    {
        const std::int64_t g = mesh_.axes[static_cast<size_t>(a)].size;
        for (size_t e = 0; e < need[0].size(); ++e) {
            bool ok = true;
            for (int d = 0; d < devices_ && ok; ++d) {
                const auto& b = blocks[static_cast<size_t>(d)];
                if (b.size[e] % g != 0) {
                    ok = false;
                    break;
                }
                const std::int64_t len = b.size[e] / g, lo = b.start[e] + coords(d)[static_cast<size_t>(a)] * len;
                auto r = need[static_cast<size_t>(d)][e];
                ok = r.lo >= lo && r.hi <= lo + len;
                for (size_t f = 0; f < need[0].size() && ok; ++f)
                    if (f != e)
                        ok = need[static_cast<size_t>(d)][f].lo >= b.start[f] &&
                             need[static_cast<size_t>(d)][f].hi <= b.start[f] + b.size[f];
            }
            if (ok) return static_cast<int>(e);
        }
        return -1;
    }

    void reduceScatter(std::vector<Block>& blocks, int a, int dim)
    {
        allReduce(blocks, a);
        const std::int64_t g = mesh_.axes[static_cast<size_t>(a)].size;
        for (int d = 0; d < devices_; ++d) {
            auto& b = blocks[static_cast<size_t>(d)];
            std::vector<Range> keep;
            for (size_t e = 0; e < b.size.size(); ++e) keep.push_back({b.start[e], b.start[e] + b.size[e]});
            const std::int64_t len = b.size[static_cast<size_t>(dim)] / g;
            keep[static_cast<size_t>(dim)].lo = b.start[static_cast<size_t>(dim)] + coords(d)[static_cast<size_t>(a)] * len;
            keep[static_cast<size_t>(dim)].hi = keep[static_cast<size_t>(dim)].lo + len;
            b = b.slice(keep);
        }
    }

    // Whether the group of `device` along axis a holds consecutive pieces of dim e (and equal
    // ranges elsewhere), so that an all-gather over a assembles a larger box.
    bool gatherable(const std::vector<Block>& blocks, int a, size_t e, int device) const
    {
        if (mesh_.axes[static_cast<size_t>(a)].size <= 1) return false;
        const auto members = group(device, a);
        std::int64_t next = blocks[static_cast<size_t>(members[0])].start[e];
        for (int m : members) {
            const auto& b = blocks[static_cast<size_t>(m)];
            const auto& first = blocks[static_cast<size_t>(members[0])];
            for (size_t f = 0; f < b.size.size(); ++f)
                if (f != e && (b.start[f] != first.start[f] || b.size[f] != first.size[f])) return false;
            if (b.start[e] != next) return false;
            next += b.size[e];
        }
        return true;
    }

    void allGather(std::vector<Block>& blocks, int a, size_t e) const
    {
        std::vector<Block> out = blocks;
        for (int d = 0; d < devices_; ++d) {
            const auto members = group(d, a);
            const auto& first = blocks[static_cast<size_t>(members[0])];
            std::vector<Range> box;
            for (size_t f = 0; f < first.size.size(); ++f) box.push_back({first.start[f], first.start[f] + first.size[f]});
            const auto& last = blocks[static_cast<size_t>(members.back())];
            box[e].hi = last.start[e] + last.size[e];
            Block whole = Block::zeros(box);
            whole.partial = first.partial;
            const auto wst = whole.strides();
            for (int m : members) {
                const auto& b = blocks[static_cast<size_t>(m)];
                const auto bst = b.strides();
                for (std::int64_t k = 0; k < b.numel(); ++k) {
                    std::int64_t rest = k, off = 0;
                    for (size_t f = 0; f < b.size.size(); ++f) {
                        const std::int64_t i = rest / bst[f];
                        rest %= bst[f];
                        off += (i + b.start[f] - whole.start[f]) * wst[f];
                    }
                    whole.data[static_cast<size_t>(off)] = b.data[static_cast<size_t>(k)];
                }
            }
            out[static_cast<size_t>(d)] = std::move(whole);
        }
        blocks = std::move(out);
    }

    const Mesh& mesh_;
    const std::map<ListedKey, int>& listed_;
    VerifyReport& report_;
    int devices_;
    std::vector<std::vector<int>> coords_;
};

// Max relative difference of the devices' outputs against the reference; partial outputs are
// summed over their axis group first (what the next collective would produce).
// `floor` is the smallest scale: 1 for activations (absolute below 1), tiny for gradients,
// whose values are small (the loss is a mean) but must still match to float precision.
double compareOutput(const std::vector<Block>& shards, const Block& reference, const ShardedRun& run, const Mesh& mesh,
                     double floor = 1)
{
    double scale = floor;
    for (float v : reference.data) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    double worst = 0;
    for (int d = 0; d < run.devices(); ++d) {
        const auto& b = shards[static_cast<size_t>(d)];
        bool leader = true;
        for (size_t a = 0; a < mesh.axes.size(); ++a)
            if ((b.partial & (AxisMask{1} << a)) && run.coords(d)[a] != 0) leader = false;
        if (!leader) continue;
        std::vector<float> sum = b.data;
        std::vector<int> members{d};
        for (size_t a = 0; a < mesh.axes.size(); ++a) {
            if (!(b.partial & (AxisMask{1} << a))) continue;
            std::vector<int> grown;
            for (int m : members)
                for (int p : run.group(m, static_cast<int>(a))) grown.push_back(p);
            members = grown;
        }
        if (members.size() > 1) {
            std::fill(sum.begin(), sum.end(), 0.0f);
            for (int m : members)
                for (size_t k = 0; k < sum.size(); ++k) sum[k] += shards[static_cast<size_t>(m)].data[k];
        }
        std::vector<Range> box;
        for (size_t f = 0; f < b.size.size(); ++f) box.push_back({b.start[f], b.start[f] + b.size[f]});
        const Block ref = reference.slice(box);
        for (size_t k = 0; k < sum.size(); ++k)
            worst = std::max(worst, std::fabs(static_cast<double>(sum[k]) - ref.data[k]) / scale);
    }
    return worst;
}

} // namespace

std::vector<std::string> shrinkOverrides(const json& config, int devices)
{
    const std::int64_t u = devices;
    const std::string family = config.value("family", std::string());
    std::vector<std::string> o;
    auto set = [&](const std::string& key, std::int64_t v) { o.push_back(key + "=" + std::to_string(v)); };
    set("batch", u);
    if (family == "resnet") {
        set("image", 32);
        set("classes", 4 * u);
        o.push_back("blocks=1,1,1,1");
        set("width_per_group", 4 * u); // bottleneck widths 4u, 8u, 16u, 32u: divisible by u
        return o;
    }
    const std::int64_t heads = intOr(config, "heads", 1), kv = intOr(config, "kv_heads", heads);
    const std::int64_t groups = kv > 0 && heads % kv == 0 && heads != kv ? 2 : 1;
    set("heads", u * groups);
    if (config.contains("kv_heads")) set("kv_heads", u);
    set("head_dim", u);
    set("hidden", u * groups * u);
    set("ffn", 2 * u * groups * u);
    if (family == "vit") {
        set("image", 8);
        set("patch", 2);
        set("classes", 4 * u);
        return o;
    }
    set("seq", u);
    set("vocab", 4 * u);
    if (config.contains("positions") || family == "gpt" || family == "bert" || family == "llama") set("positions", u);
    if (config.contains("target_seq")) set("target_seq", u);
    if (family == "t5") set("buckets", u);
    if (config.contains("experts")) {
        // u experts (an expert split of u divides them), each with u slots, top-k at most u.
        set("experts", u);
        set("capacity", u);
        if (config.contains("experts_per_token")) set("experts_per_token", std::min<std::int64_t>(intOr(config, "experts_per_token", 1), u));
        if (config.contains("expert_ffn")) set("expert_ffn", 2 * u * groups * u);
        if (config.contains("shared_expert_ffn")) set("shared_expert_ffn", 2 * u * groups * u);
    }
    // Latent attention: every rank and head part u wide.
    for (const char* key : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
        if (config.contains(key)) set(key, u);
    return o;
}

namespace {

std::string errorText(double e)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", e);
    return buf;
}

std::vector<Range> boxOf(const Block& b)
{
    std::vector<Range> box;
    for (size_t f = 0; f < b.size.size(); ++f) box.push_back({b.start[f], b.start[f] + b.size[f]});
    return box;
}

// Adds `part` into `into` over the box of `into` (which `part` must cover).
void addInto(Block& into, const Block& part)
{
    const Block s = part.slice(boxOf(into));
    for (size_t k = 0; k < s.data.size(); ++k) into.data[k] += s.data[k];
}

// One consumer's gradient of a tensor, per device, partial over the axes its box summed.
struct Contribution {
    std::vector<Block> blocks;
    OpId consumer = -1;
};

// Contributions laid out alike (same box on every device, same partial axes) are added
// locally, as a runtime accumulates gradients before reducing them once.
std::vector<Contribution> accumulate(std::vector<Contribution> list)
{
    std::vector<Contribution> groups;
    for (auto& c : list) {
        auto same = std::find_if(groups.begin(), groups.end(), [&](const Contribution& g) {
            for (size_t d = 0; d < c.blocks.size(); ++d)
                if (g.blocks[d].start != c.blocks[d].start || g.blocks[d].size != c.blocks[d].size ||
                    g.blocks[d].partial != c.blocks[d].partial)
                    return false;
            return true;
        });
        if (same == groups.end()) {
            groups.push_back(std::move(c));
            continue;
        }
        for (size_t d = 0; d < c.blocks.size(); ++d)
            for (size_t k = 0; k < c.blocks[d].data.size(); ++k) same->blocks[d].data[k] += c.blocks[d].data[k];
    }
    return groups;
}

template <class F>
void forDevices(int devices, bool threads, F&& f)
{
    if (!threads) {
        for (int d = 0; d < devices; ++d) f(d);
        return;
    }
    std::vector<std::thread> pool;
    for (int d = 0; d < devices; ++d) pool.emplace_back(f, d);
    for (auto& t : pool) t.join();
}

} // namespace

namespace {

// ---- Small steps shared by the runs ---------------------------------------------------------

void addNote(std::string& notes, const std::string& note) { notes += (notes.empty() ? "" : "; ") + note; }

// Widens `scale` to the largest magnitude in `b`.
void widen(double& scale, const Block& b)
{
    for (float v : b.data) scale = std::max(scale, static_cast<double>(std::fabs(v)));
}

// ---- The plan and the shrunk model ----------------------------------------------------------

// The plan as verify reads it: the mesh by axis names and sizes (links do not matter here),
// each op's strategy, einsum and representative, and the listed collectives of every phase.
struct PlanView {
    Mesh mesh;
    std::map<std::string, PlannedOp> planned;
    std::map<ListedKey, int> listed;
};

PlanView readPlanView(const json& plan, VerifyReport& report)
{
    PlanView view;
    const JsonReader r("plan");
    r.envelope(plan, "plan", "tpstudio.plan", kPlanFormatVersion);
    const json& model = r.object(plan, "", "model");
    if (!r.optional(model, "config") || !model["config"].is_object())
        r.fail("/model/config", "is missing; verify shrinks the model from its builder config, so it needs a plan of a built-in "
                                "or config.json model");
    report.mode = r.optional(plan, "mode") ? r.string(plan, "", "mode") : std::string("train");

    const json& mesh = r.object(plan, "", "mesh");
    const json& axes = r.array(mesh, "/mesh", "axes");
    for (size_t i = 0; i < axes.size(); ++i) {
        const std::string p = "/mesh/axes/" + std::to_string(i);
        MeshAxis axis;
        axis.name = r.string(axes[i], p, "name");
        const json* size = r.optional(axes[i], "size");
        axis.size = size ? static_cast<int>(r.integer(*size, p + "/size", 1)) : 1;
        view.mesh.axes.push_back(axis);
    }
    if (r.optional(mesh, "shape")) report.mesh = r.string(mesh, "/mesh", "shape");
    report.devices = view.mesh.devices();

    // Ops: strategy, einsum and representative (the op at the same position of its class's
    // first instance; ops are listed in topological order, instances in matching order).
    const json& ops = r.array(plan, "", "ops");
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::string>> instanceOps;
    for (size_t i = 0; i < ops.size(); ++i) {
        const std::string p = "/ops/" + std::to_string(i);
        const json& o = ops[i];
        const std::string name = r.string(o, p, "name");
        PlannedOp planned{r.string(o, p, "strategy"), r.optional(o, "einsum") ? r.string(o, p, "einsum") : std::string(), name};
        const json *blockClass = r.optional(o, "block_class"), *instance = r.optional(o, "instance");
        if (blockClass && instance)
            instanceOps[{r.integer(*blockClass, p + "/block_class"), r.integer(*instance, p + "/instance")}].push_back(name);
        view.planned[name] = planned;
    }
    for (const auto& [key, names] : instanceOps) {
        auto first = instanceOps.find({key.first, 0});
        if (first == instanceOps.end() || first->second.size() != names.size()) continue;
        for (size_t k = 0; k < names.size(); ++k) view.planned[names[k]].representative = first->second[k];
    }
    // The listed collectives of every phase: forward (after the producer, before its
    // consumers), backward (the gradient of the producer's output, from its consumers' layout
    // to its own) and gradient (a weight's gradient, at an op that reads it).
    const json none = json::array();
    const json& collectives = r.optional(plan, "collectives") ? r.array(plan, "", "collectives") : none;
    for (size_t i = 0; i < collectives.size(); ++i) {
        const std::string p = "/collectives/" + std::to_string(i);
        const json& c = collectives[i];
        const std::string phase = r.optional(c, "phase") ? r.string(c, p, "phase") : std::string("forward");
        if (phase != "forward" && phase != "backward" && phase != "gradient") continue;
        ListedKey key{r.string(c, p, "at"), r.string(c, p, "kind"), r.string(c, p, "axis"), phase};
        if (!view.listed.count(key)) report.collectives.push_back({key.at, key.kind, key.axis, phase, 0});
        const json* count = r.optional(c, "count");
        view.listed[key] += count ? static_cast<int>(r.integer(*count, p + "/count", 0)) : 1;
    }
    return view;
}

// The shrunk model: same ops (by name), same einsums, small sizes; each op's signature, its
// strategy on the plan's mesh and the semantics verify executes it with.
struct ShrunkModel {
    Graph g;
    std::vector<Signature> sigs;
    std::vector<OpStrategy> strategies;
    std::vector<OpSemantics> semantics;
};

ShrunkModel shrinkModel(const json& plan, const VerifyOptions& options, const PlanView& view, bool train, VerifyReport& report)
{
    ShrunkModel m;
    json config = plan["model"]["config"];
    report.shrunk = shrinkOverrides(config, report.devices);
    for (const auto& o : options.overrides) report.shrunk.push_back(o);
    applyOverrides(config, report.shrunk);
    m.g = buildModel(config);
    const Graph& g = m.g;
    for (const auto& op : g.ops) {
        auto it = view.planned.find(op.name);
        if (it == view.planned.end())
            throw InputError("plan: the shrunk model has op '" + op.name + "', which the plan does not list");
        m.sigs.push_back(opSignature(op, g));
        if (!it->second.einsum.empty() && it->second.einsum != m.sigs.back().equation)
            throw InputError("plan: op '" + op.name + "': einsum '" + it->second.einsum + "' in the plan, '" +
                             m.sigs.back().equation + "' in the shrunk model");
        try {
            m.strategies.push_back(parseStrategy(it->second.strategy, m.sigs.back(), view.mesh));
        } catch (const InputError& e) {
            throw InputError("plan: op '" + op.name + "' on the shrunk model (" + std::string(e.what()) + ")");
        }
        auto sem = opSemantics(op.kind);
        if (!sem)
            throw InputError("plan: op '" + op.name + "': verify cannot execute " + std::string(opKindName(op.kind)) + " ops");
        m.semantics.push_back(*sem);
    }
    if (train)
        for (const auto& op : g.ops)
            if (!m.semantics[static_cast<size_t>(op.id)].differentiable())
                throw InputError("plan: op '" + op.name + "': verify has no derivative for " + std::string(opKindName(op.kind)) +
                                 " ops, so it cannot run the backward pass of this train-mode plan");
    for (auto& c : report.collectives)
        c.inShrunkModel = std::any_of(g.ops.begin(), g.ops.end(), [&](const Op& op) { return op.name == c.at; });
    return m;
}

// ---- The runs -------------------------------------------------------------------------------

// The single-device reference and the sharded run of one shrunk model, forward then backward.
// Each step fills the report; a step that stops the verification returns false.
class Verifier {
public:
    Verifier(const VerifyOptions& options, PlanView& view, const ShrunkModel& model, bool train, VerifyReport& report) :
        options_(options),
        mesh_(view.mesh),
        planned_(view.planned),
        g_(model.g),
        sigs_(model.sigs),
        strategies_(model.strategies),
        semantics_(model.semantics),
        train_(train),
        report_(report),
        producers_(g_.producers()),
        consumers_(g_.consumers()),
        order_(g_.topologicalOrder()),
        run_(mesh_, view.listed, report),
        D_(run_.devices())
    {}

    void referenceForward();
    bool shardedForward();
    void referenceBackward();
    bool shardedBackward();
    int devices() const { return D_; }

private:
    bool floating(TensorId t) const { return !isInteger(g_.tensor(t).dtype); }
    std::vector<Range> fullLoops(OpId id) const
    {
        std::vector<Range> loops;
        for (const auto& l : sigs_[static_cast<size_t>(id)].loops) loops.push_back({0, l.size});
        return loops;
    }
    void fail(const std::string& op, const std::string& phase, const std::string& message)
    {
        report_.failedOp = op;
        report_.failedPhase = phase;
        report_.message = message;
        report_.passed = false;
    }
    // Records a backward comparison of the op being differentiated.
    void record(OpCheck& check, double error, const std::string& what)
    {
        check.backwardError = std::max(check.backwardError, error);
        if (error > options_.tolerance && firstBad_.empty())
            firstBad_ = what + " differs from the single-device backward (max relative error " + errorText(error) + ")";
    }
    bool forwardOp(OpId id);
    bool differentiateOp(OpId id);
    bool gradientsOfOutputs(OpId id, std::vector<std::vector<Block>>& dOut);
    void gradientsToInputs(OpId id, const std::vector<std::vector<Block>>& dOut);
    bool weightGradient(OpId id, size_t i);
    void reduceWeightGradient(OpId id, const std::string& name, TensorId w, std::vector<Contribution>& groups);
    OpId firstReader(TensorId t) const;

    const VerifyOptions& options_;
    const Mesh& mesh_;
    std::map<std::string, PlannedOp>& planned_;
    const Graph& g_;
    const std::vector<Signature>& sigs_;
    const std::vector<OpStrategy>& strategies_;
    const std::vector<OpSemantics>& semantics_;
    const bool train_;
    VerifyReport& report_;
    const std::vector<OpId> producers_;
    const std::vector<std::vector<OpId>> consumers_;
    const std::vector<OpId> order_;
    ShardedRun run_;
    const int D_;

    std::vector<Block> reference_;         ///< every tensor whole
    std::vector<std::vector<Block>> held_; ///< per tensor, per device
    // What the backward needs from the forward: each op's loop boxes and the inputs it read.
    std::vector<std::vector<std::vector<Range>>> opLoops_;
    std::vector<std::vector<std::vector<Block>>> saved_;
    std::vector<size_t> checkOf_; ///< op -> index in report_.ops
    // The reference backward: the seeded output gradients, every floating tensor's total
    // gradient, and what each op sends to each of its inputs.
    std::vector<Block> refGrad_, seed_;
    std::vector<std::vector<Block>> refIn_;
    std::vector<size_t> position_;                   ///< op -> position in order_
    std::vector<std::vector<Contribution>> pending_; ///< per tensor, gradients not yet summed
    // The op being differentiated: the scale its gradients are compared at, the first mismatch.
    double opScale_ = 1e-6;
    std::string firstBad_;
};

// Reference: every tensor whole.
void Verifier::referenceForward()
{
    reference_.assign(g_.tensors.size(), Block{});
    for (const auto& t : g_.tensors)
        if (producers_[static_cast<size_t>(t.id)] < 0)
            reference_[static_cast<size_t>(t.id)] = randomTensor(g_, t.id, sigs_, consumers_, options_.seed);
    for (OpId id : order_) {
        const Op& op = g_.op(id);
        std::vector<const Block*> in;
        for (auto t : op.inputs) in.push_back(&reference_[static_cast<size_t>(t)]);
        auto outs = evaluateOp(op, sigs_[static_cast<size_t>(id)], semantics_[static_cast<size_t>(id)], g_, fullLoops(id), in);
        for (size_t k = 0; k < outs.size(); ++k) reference_[static_cast<size_t>(op.outputs[k])] = std::move(outs[k]);
    }
}

// Sharded: each device holds its blocks; graph inputs and weights are loaded whole (each
// device reads the slice its strategy needs).
bool Verifier::shardedForward()
{
    held_.assign(g_.tensors.size(), {});
    for (const auto& t : g_.tensors)
        if (producers_[static_cast<size_t>(t.id)] < 0)
            held_[static_cast<size_t>(t.id)].assign(static_cast<size_t>(D_), reference_[static_cast<size_t>(t.id)]);
    opLoops_.assign(g_.ops.size(), {});
    saved_.assign(g_.ops.size(), {});
    checkOf_.assign(g_.ops.size(), 0);
    for (OpId id : order_)
        if (!forwardOp(id)) return false;
    return true;
}

bool Verifier::forwardOp(OpId id)
{
    const Op& op = g_.op(id);
    const auto& sig = sigs_[static_cast<size_t>(id)];
    const auto& st = strategies_[static_cast<size_t>(id)];
    OpCheck check;
    check.name = op.name;
    check.kind = std::string(opKindName(op.kind));
    check.strategy = planned_[op.name].strategy;
    std::vector<std::vector<Range>> loops(static_cast<size_t>(D_));
    for (int d = 0; d < D_; ++d) loops[static_cast<size_t>(d)] = deviceLoops(sig, st, run_.coords(d), mesh_);
    std::vector<std::vector<Block>> inputs(op.inputs.size());
    try {
        for (size_t i = 0; i < op.inputs.size(); ++i) {
            const TensorId t = op.inputs[i];
            inputs[i] = held_[static_cast<size_t>(t)];
            const OpId p = producers_[static_cast<size_t>(t)];
            std::vector<std::vector<Range>> need(static_cast<size_t>(D_));
            for (int d = 0; d < D_; ++d)
                need[static_cast<size_t>(d)] =
                    operandRanges(sig.inputs[i], sig, loops[static_cast<size_t>(d)], g_.tensor(t).shape);
            if (p < 0) continue;
            const std::string& producer = g_.op(p).name;
            auto notes = run_.reshard(inputs[i], need, g_.tensor(t).name, producer, planned_[producer].representative, op.name);
            for (const auto& n : notes) addNote(check.note, n);
        }
    } catch (const Failure& f) {
        check.ok = false;
        check.maxError = INFINITY;
        check.note = f.message;
        report_.ops.push_back(check);
        fail(f.op, "forward", "op '" + f.op + "' cannot run as planned: " + f.message);
        return false;
    }
    std::vector<std::vector<Block>> outs(static_cast<size_t>(D_));
    forDevices(D_, options_.devicesAsThreads, [&](int d) {
        std::vector<const Block*> in;
        for (auto& per : inputs) in.push_back(&per[static_cast<size_t>(d)]);
        outs[static_cast<size_t>(d)] =
            evaluateOp(op, sig, semantics_[static_cast<size_t>(id)], g_, loops[static_cast<size_t>(d)], in);
    });
    for (size_t k = 0; k < op.outputs.size(); ++k) {
        // Partial over the axes that split loops the output is not indexed by: those
        // devices summed only their slice of the loop.
        AxisMask partial = 0;
        for (size_t l = 0; l < sig.loops.size(); ++l) {
            bool indexed = false;
            for (const auto& grp : sig.outputs[k].dims)
                indexed = indexed || std::find(grp.begin(), grp.end(), static_cast<int>(l)) != grp.end();
            if (!indexed)
                for (int a : st.loopAxes[l]) partial |= AxisMask{1} << a;
        }
        auto& h = held_[static_cast<size_t>(op.outputs[k])];
        h.clear();
        for (int d = 0; d < D_; ++d) {
            h.push_back(std::move(outs[static_cast<size_t>(d)][k]));
            h.back().partial = partial;
        }
        check.maxError = std::max(check.maxError, compareOutput(h, reference_[static_cast<size_t>(op.outputs[k])], run_, mesh_));
    }
    check.ok = check.maxError <= options_.tolerance;
    report_.forwardError = std::max(report_.forwardError, check.maxError);
    checkOf_[static_cast<size_t>(id)] = report_.ops.size();
    // The forward goes on past a mismatch (every op's error is reported); the first one
    // names the failure and the backward is not run.
    if (!check.ok && report_.failedOp.empty())
        fail(op.name, "forward",
             "op '" + op.name + "' differs from the single-device result (max relative error " + errorText(check.maxError) + ")" +
                 (check.note.empty() ? std::string() : ": " + check.note));
    report_.ops.push_back(std::move(check));
    if (train_) {
        opLoops_[static_cast<size_t>(id)] = std::move(loops);
        saved_[static_cast<size_t>(id)] = std::move(inputs);
    }
    return true;
}

// Reference backward: a random gradient seeded at every output (a tensor no op reads, or one
// marked as an output), propagated in reverse topological order; refIn keeps what each op
// sends to each input, refGrad the total gradient of every floating tensor.
void Verifier::referenceBackward()
{
    refGrad_.assign(g_.tensors.size(), Block{});
    seed_.assign(g_.tensors.size(), Block{});
    for (const auto& t : g_.tensors) {
        if (!floating(t.id)) continue;
        std::vector<Range> full;
        for (auto d : t.shape) full.push_back({0, d});
        refGrad_[static_cast<size_t>(t.id)] = Block::zeros(full);
        if (producers_[static_cast<size_t>(t.id)] >= 0 &&
            (consumers_[static_cast<size_t>(t.id)].empty() || t.role == TensorRole::Output)) {
            auto& s = seed_[static_cast<size_t>(t.id)];
            s = Block::zeros(full);
            std::mt19937_64 rng(fnv1a(t.name + "#gradient", options_.seed));
            std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
            for (auto& v : s.data) v = dist(rng);
            refGrad_[static_cast<size_t>(t.id)] = s;
        }
    }
    refIn_.assign(g_.ops.size(), {});
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
        const Op& op = g_.op(*it);
        std::vector<Block> zeros;
        std::vector<const Block*> dOut, in;
        zeros.reserve(op.outputs.size());
        for (auto t : op.outputs) {
            if (floating(t)) {
                dOut.push_back(&refGrad_[static_cast<size_t>(t)]);
                continue;
            }
            std::vector<Range> full;
            for (auto d : g_.tensor(t).shape) full.push_back({0, d});
            zeros.push_back(Block::zeros(full));
            dOut.push_back(&zeros.back());
        }
        for (auto t : op.inputs) in.push_back(&reference_[static_cast<size_t>(t)]);
        refIn_[static_cast<size_t>(*it)] =
            backwardOp(op, sigs_[static_cast<size_t>(*it)], semantics_[static_cast<size_t>(*it)], g_, fullLoops(*it), in, dOut);
        for (size_t i = 0; i < op.inputs.size(); ++i)
            if (floating(op.inputs[i])) addInto(refGrad_[static_cast<size_t>(op.inputs[i])], refIn_[static_cast<size_t>(*it)][i]);
    }
}

// A weight's gradient is complete at the first op that reads it, which the reverse sweep
// reaches last.
OpId Verifier::firstReader(TensorId t) const
{
    OpId best = -1;
    for (OpId c : consumers_[static_cast<size_t>(t)])
        if (best < 0 || position_[static_cast<size_t>(c)] < position_[static_cast<size_t>(best)]) best = c;
    return best;
}

// Sharded backward, in reverse topological order.
bool Verifier::shardedBackward()
{
    position_.assign(g_.ops.size(), 0);
    for (size_t k = 0; k < order_.size(); ++k) position_[static_cast<size_t>(order_[k])] = k;
    pending_.assign(g_.tensors.size(), {});
    for (auto it = order_.rbegin(); it != order_.rend(); ++it)
        if (!differentiateOp(*it)) return false;
    return true;
}

bool Verifier::differentiateOp(OpId id)
{
    const Op& op = g_.op(id);
    OpCheck& check = report_.ops[checkOf_[static_cast<size_t>(id)]];
    check.backwardRun = true;
    firstBad_.clear();
    // Gradients are compared relative to the largest single-device gradient this op
    // handles: a gradient that is zero in exact arithmetic (a key bias under softmax)
    // is float noise relative to its own tiny maximum.
    opScale_ = 1e-6;
    for (auto t : op.outputs)
        if (floating(t)) widen(opScale_, refGrad_[static_cast<size_t>(t)]);
    for (size_t i = 0; i < op.inputs.size(); ++i)
        if (floating(op.inputs[i])) widen(opScale_, refIn_[static_cast<size_t>(id)][i]);

    std::vector<std::vector<Block>> dOut(op.outputs.size());
    if (!gradientsOfOutputs(id, dOut)) return false;
    gradientsToInputs(id, dOut);
    for (size_t i = 0; i < op.inputs.size(); ++i)
        if (!weightGradient(id, i)) return false;
    check.backwardOk = firstBad_.empty();
    report_.backwardError = std::max(report_.backwardError, check.backwardError);
    if (!check.backwardOk) {
        fail(op.name, "backward",
             "backward: op '" + op.name + "': " + firstBad_ +
                 (check.backwardNote.empty() ? std::string() : ": " + check.backwardNote));
        return false;
    }
    return true;
}

// 1. The gradient of each output, brought to this op's layout by the listed backward
// collectives after its representative.
bool Verifier::gradientsOfOutputs(OpId id, std::vector<std::vector<Block>>& dOut)
{
    const Op& op = g_.op(id);
    const auto& sig = sigs_[static_cast<size_t>(id)];
    const auto& loops = opLoops_[static_cast<size_t>(id)];
    OpCheck& check = report_.ops[checkOf_[static_cast<size_t>(id)]];
    try {
        for (size_t k = 0; k < op.outputs.size(); ++k) {
            const TensorId t = op.outputs[k];
            std::vector<std::vector<Range>> need(static_cast<size_t>(D_));
            for (int d = 0; d < D_; ++d) {
                need[static_cast<size_t>(d)] =
                    operandRanges(sig.outputs[k], sig, loops[static_cast<size_t>(d)], g_.tensor(t).shape);
                dOut[k].push_back(Block::zeros(need[static_cast<size_t>(d)]));
                if (floating(t) && !seed_[static_cast<size_t>(t)].data.empty())
                    addInto(dOut[k].back(), seed_[static_cast<size_t>(t)]);
            }
            if (!floating(t)) continue;
            for (auto& group : accumulate(std::move(pending_[static_cast<size_t>(t)]))) {
                for (const auto& n : run_.reshard(group.blocks, need, g_.tensor(t).name, op.name,
                                                  planned_[op.name].representative, op.name, "backward"))
                    addNote(check.backwardNote, n);
                for (int d = 0; d < D_; ++d) addInto(dOut[k][static_cast<size_t>(d)], group.blocks[static_cast<size_t>(d)]);
            }
            pending_[static_cast<size_t>(t)].clear();
            record(check, compareOutput(dOut[k], refGrad_[static_cast<size_t>(t)], run_, mesh_, opScale_),
                   "the gradient of its output '" + g_.tensor(t).name + "'");
        }
    } catch (const Failure& f) {
        check.backwardOk = false;
        check.backwardError = INFINITY;
        check.backwardNote = f.message;
        fail(op.name, "backward", "backward: op '" + op.name + "' cannot run as planned: " + f.message);
        return false;
    }
    return true;
}

// 2. Each device differentiates over its own loop box; what it sends to each floating input
// waits in pending_ until that input's producer (or, for weights, their first reader) sums it.
void Verifier::gradientsToInputs(OpId id, const std::vector<std::vector<Block>>& dOut)
{
    const Op& op = g_.op(id);
    const auto& sig = sigs_[static_cast<size_t>(id)];
    const auto& st = strategies_[static_cast<size_t>(id)];
    const auto& sem = semantics_[static_cast<size_t>(id)];
    const auto& loops = opLoops_[static_cast<size_t>(id)];
    OpCheck& check = report_.ops[checkOf_[static_cast<size_t>(id)]];
    std::vector<std::vector<Block>> dIn(static_cast<size_t>(D_));
    forDevices(D_, options_.devicesAsThreads, [&](int d) {
        std::vector<const Block*> in, dy;
        for (auto& per : saved_[static_cast<size_t>(id)]) in.push_back(&per[static_cast<size_t>(d)]);
        for (auto& per : dOut) dy.push_back(&per[static_cast<size_t>(d)]);
        dIn[static_cast<size_t>(d)] = backwardOp(op, sig, sem, g_, loops[static_cast<size_t>(d)], in, dy);
    });
    saved_[static_cast<size_t>(id)].clear();
    for (size_t i = 0; i < op.inputs.size(); ++i) {
        const TensorId t = op.inputs[i];
        if (!floating(t)) continue;
        // A device that summed over its slice of a loop holds partial sums over the axes
        // splitting that loop: what the device computed, not a derivation of the plan.
        const auto summed = gradientSummedLoops(sig, sem, op, i);
        AxisMask partial = 0;
        for (size_t l = 0; l < sig.loops.size(); ++l)
            if (summed[l])
                for (int a : st.loopAxes[l]) partial |= AxisMask{1} << a;
        Contribution c{{}, id};
        for (int d = 0; d < D_; ++d) {
            c.blocks.push_back(std::move(dIn[static_cast<size_t>(d)][i]));
            c.blocks.back().partial = partial;
        }
        record(check, compareOutput(c.blocks, refIn_[static_cast<size_t>(id)][i], run_, mesh_, opScale_),
               "the gradient it sends to its input '" + g_.tensor(t).name + "'");
        pending_[static_cast<size_t>(t)].push_back(std::move(c));
    }
}

// 3. A weight first read here (input i): its gradient is complete. False when it cannot be
// assembled as the plan lists it.
bool Verifier::weightGradient(OpId id, size_t i)
{
    const Op& op = g_.op(id);
    OpCheck& check = report_.ops[checkOf_[static_cast<size_t>(id)]];
    const TensorId w = op.inputs[i];
    if (producers_[static_cast<size_t>(w)] >= 0 || g_.tensor(w).role != TensorRole::Weight || !floating(w) ||
        firstReader(w) != id || pending_[static_cast<size_t>(w)].empty())
        return true;
    if (std::find(op.inputs.begin(), op.inputs.begin() + static_cast<std::ptrdiff_t>(i), w) !=
        op.inputs.begin() + static_cast<std::ptrdiff_t>(i))
        return true;
    const std::string& name = g_.tensor(w).name;
    // The owner (this op) contributed last; its layout is where the gradient lives.
    auto list = std::move(pending_[static_cast<size_t>(w)]);
    pending_[static_cast<size_t>(w)].clear();
    std::stable_partition(list.begin(), list.end(), [&](const Contribution& c) { return c.consumer == id; });
    auto groups = accumulate(std::move(list));
    reduceWeightGradient(id, name, w, groups);
    std::vector<Block> total = groups[0].blocks;
    std::string moved;
    for (size_t k = 1; k < groups.size() && moved.empty(); ++k)
        for (int d = 0; d < D_ && moved.empty(); ++d) {
            if (groups[k].blocks[static_cast<size_t>(d)].covers(boxOf(total[static_cast<size_t>(d)]))) {
                addInto(total[static_cast<size_t>(d)], groups[k].blocks[static_cast<size_t>(d)]);
                continue;
            }
            moved = "device " + coordsText(run_.coords(d), mesh_) + " holds " + rangesText(boxOf(total[static_cast<size_t>(d)])) +
                    " of weight '" + name + "' but '" + g_.op(groups[k].consumer).name + "' computed its gradient over " +
                    rangesText(boxOf(groups[k].blocks[static_cast<size_t>(d)])) + "; the plan lists no collective to bring it";
        }
    if (!moved.empty()) {
        check.backwardOk = false;
        check.backwardError = INFINITY;
        check.backwardNote = moved;
        fail(op.name, "backward", "backward: op '" + op.name + "': weight gradient of '" + name + "': " + moved);
        return false;
    }
    check.weightGradients.push_back(name);
    ++report_.weightGradients;
    widen(opScale_, refGrad_[static_cast<size_t>(w)]);
    record(check, compareOutput(total, refGrad_[static_cast<size_t>(w)], run_, mesh_, opScale_),
           "the weight gradient of '" + name + "'");
    return true;
}

// The data-parallel gradient all-reduce over an axis is performed where the plan lists a
// "gradient" all-reduce (or ZeRO's reduce-scatter) over it at an op that reads the weight; any other partial axis stays
// unreduced (each device keeps its own partial sum) and is reported.
void Verifier::reduceWeightGradient(OpId id, const std::string& name, TensorId w, std::vector<Contribution>& groups)
{
    const Op& op = g_.op(id);
    OpCheck& check = report_.ops[checkOf_[static_cast<size_t>(id)]];
    for (auto& group : groups)
        for (int a = 0; a < static_cast<int>(mesh_.axes.size()); ++a) {
            const AxisMask bit = AxisMask{1} << a;
            if (!(group.blocks[0].partial & bit)) continue;
            const std::string axis = mesh_.axes[static_cast<size_t>(a)].name;
            // ZeRO 2 and 3 reduce-scatter the gradient instead: each device keeps its shard of
            // the same sum, which the whole sum compared here contains.
            std::string at;
            const char* kind = "all-reduce";
            for (OpId c : consumers_[static_cast<size_t>(w)])
                for (const char* k : {"all-reduce", "reduce-scatter"})
                    if (at.empty() && run_.listed(planned_[g_.op(c).name].representative, k, axis, "gradient")) {
                        at = planned_[g_.op(c).name].representative;
                        kind = k;
                    }
            if (!at.empty()) {
                run_.allReduce(group.blocks, a);
                run_.perform(at, kind, axis, "gradient");
                continue;
            }
            if (group.consumer != id) {
                // A later reader of a weight read by several ops (a tied embedding) whose box is
                // partial over an axis the plan lists no gradient all-reduce for: the plan format
                // states a weight's gradient collectives at one op only. The reduction is runtime
                // knowledge, not a derivation of the plan: each device knows it summed over its
                // own slice of the loops the weight lacks, and a replicated weight's gradient is
                // complete only after summing those partial sums over the axis (as DDP does for
                // every parameter). It is performed and reported as unlisted: the plan's cost
                // does not include it.
                run_.allReduce(group.blocks, a);
                report_.unlisted.push_back("weight '" + name + "': the gradient from '" + g_.op(group.consumer).name +
                                           "' is partial over " + axis + "; all-reduced over " + axis +
                                           " although the plan lists no gradient all-reduce over " + axis +
                                           " at an op that reads it (its first reader '" + op.name + "' needs none)");
                continue;
            }
            for (auto& b : group.blocks) b.partial &= ~bit;
            const std::string line = "the gradient of weight '" + name + "' is partial over " + axis +
                                     " but the plan lists no gradient all-reduce over " + axis + " at an op that reads it";
            addNote(check.backwardNote, line);
            report_.missing.push_back("backward, at '" + op.name + "': " + line);
        }
}

} // namespace

VerifyReport verifyPlan(const json& plan, const VerifyOptions& options)
{
    VerifyReport report;
    PlanView view = readPlanView(plan, report);
    const bool train = report.mode == "train" && !options.forwardOnly;
    const ShrunkModel model = shrinkModel(plan, options, view, train, report);
    Verifier verifier(options, view, model, train, report);
    verifier.referenceForward();
    if (!verifier.shardedForward() || !report.failedOp.empty()) return report;
    if (train) {
        report.backward = true;
        verifier.referenceBackward();
        if (!verifier.shardedBackward()) return report;
    }
    const int D = verifier.devices();
    report.passed = true;
    report.message = std::to_string(report.ops.size()) + " ops match the single-device result on " + std::to_string(D) +
                     " simulated devices (forward max relative error " + errorText(report.forwardError) +
                     (report.backward ? ", backward " + errorText(report.backwardError) + " over every op's gradients and " +
                                            std::to_string(report.weightGradients) + " weight gradients"
                                      : std::string()) +
                     ", " + std::to_string(report.collectivesPerformed) + " collectives performed)";
    return report;
}

} // namespace tp::verify
