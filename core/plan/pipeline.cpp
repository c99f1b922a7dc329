#include "pipeline.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include "../util/error.h"

namespace tp {

PipelineSchedule parseSchedule(int stages, const std::string& schedule)
{
    if (stages < 1 || stages > 4096)
        throw InputError("--pipeline " + std::to_string(stages) + ": expected a number of stages from 1 to 4096");
    PipelineSchedule s;
    s.stages = stages;
    if (schedule == "1f1b" || schedule.empty()) return s;
    const std::string prefix = "interleaved:";
    if (schedule.rfind(prefix, 0) == 0) {
        const std::string digits = schedule.substr(prefix.size());
        int v = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (ec == std::errc() && end == digits.data() + digits.size() && v >= 2 && v <= 1024) {
            if (stages < 2) throw InputError("--schedule " + schedule + ": an interleaved schedule needs --pipeline 2 or more");
            s.virtualStages = v;
            return s;
        }
    }
    throw InputError("--schedule '" + schedule + "': use auto, 1f1b or interleaved:V with V from 2 to 1024 chunks per device");
}

std::string scheduleText(const PipelineSchedule& schedule)
{
    if (schedule.virtualStages <= 1) return "1F1B";
    return "interleaved, " + std::to_string(schedule.virtualStages) + " chunks per device";
}

std::string scheduleWord(const PipelineSchedule& schedule)
{
    return schedule.virtualStages <= 1 ? "1f1b" : "interleaved:" + std::to_string(schedule.virtualStages);
}

double bubbleMicroBatches(const PipelineSchedule& schedule)
{
    return static_cast<double>(schedule.stages - 1) / static_cast<double>(schedule.virtualStages);
}

double inFlightMicroBatches(const PipelineSchedule& schedule, int stage)
{
    double held = static_cast<double>(schedule.stages - stage);
    if (schedule.virtualStages > 1) held += bubbleMicroBatches(schedule);
    return held;
}

std::string stageMeshText(const Mesh& mesh, int stages)
{
    if (mesh.axes.empty()) throw InputError("--pipeline: the mesh has no axes");
    const int outer = mesh.axes[0].size;
    if (stages < 1 || outer % stages != 0)
        throw InputError("--pipeline " + std::to_string(stages) + ": the stages must divide the outermost mesh axis (" +
                         mesh.axes[0].name + " = " + std::to_string(outer) + " on mesh " + mesh.shapeText() + ")");
    std::string text;
    if (outer / stages > 1) text = std::to_string(outer / stages);
    for (size_t a = 1; a < mesh.axes.size(); ++a) text += (text.empty() ? "" : "x") + std::to_string(mesh.axes[a].size);
    return text.empty() ? "1" : text;
}

namespace {

constexpr const char* kNoLayerStack = "the model has no run of repeated layers to split into stages";

/// Every top-level block in topological order, as (class, instance): the runs expanded.
std::vector<std::pair<int, int>> topLevelBlocks(const FoldedGraph& folded)
{
    std::vector<std::pair<int, int>> blocks;
    for (const auto& run : folded.runs)
        for (int i = 0; i < run.count; ++i) blocks.emplace_back(run.classId, run.firstInstance + i);
    return blocks;
}

/// A candidate stack: blocks [first, first + length) of the top-level blocks, repeating with
/// `period`; its whole periods hold `ops` ops.
struct Stretch {
    int first = 0, length = 0, period = 1;
    std::int64_t ops = 0;
};

/// Periods worth trying beyond 1: the distances between successive runs of one class (a class
/// that lies in one run only repeats with no longer period), the shortest first, at most 64.
std::vector<int> candidatePeriods(const FoldedGraph& folded)
{
    std::map<int, int> lastStart; // class -> its last run's first block
    std::set<int> periods;
    int at = 0;
    for (const auto& run : folded.runs) {
        if (const auto it = lastStart.find(run.classId); it != lastStart.end() && at - it->second >= 2)
            periods.insert(at - it->second);
        lastStart[run.classId] = at;
        at += run.count;
    }
    std::vector<int> out(periods.begin(), periods.end());
    if (out.size() > 64) out.resize(64);
    return out;
}

/// The best stretch of period `period` over `blocks` (no ops when none has two whole periods).
Stretch bestStretch(const FoldedGraph& folded, const std::vector<std::pair<int, int>>& blocks, int period)
{
    auto opsOf = [&](int block) {
        return static_cast<std::int64_t>(
            folded.classes[static_cast<size_t>(blocks[static_cast<size_t>(block)].first)].opsPerInstance());
    };
    Stretch best;
    const int n = static_cast<int>(blocks.size());
    auto consider = [&](int first, int length) {
        const int whole = length / period * period;
        if (whole < 2 * period) return;
        // A period of one class only is a run (period 1), not a pattern of kinds.
        bool kinds = period == 1;
        for (int i = first + 1; i < first + period && !kinds; ++i) kinds = blocks[size_t(i)].first != blocks[size_t(first)].first;
        if (!kinds) return;
        Stretch s{first, length, period, 0};
        for (int i = first; i < first + whole; ++i) s.ops += opsOf(i);
        if (s.ops > best.ops) best = s;
    };
    // Maximal stretches whose every block matches the one a period before it.
    int start = -1;
    for (int i = period; i <= n; ++i) {
        const bool same = i < n && blocks[size_t(i)].first == blocks[size_t(i - period)].first;
        if (same && start < 0) start = i - period;
        if (!same && start >= 0) {
            consider(start, i - start);
            start = -1;
        }
    }
    return best;
}

} // namespace

std::optional<LayerStack> layerStack(const FoldedGraph& folded)
{
    const auto blocks = topLevelBlocks(folded);
    // Period 1: the runs themselves (a stretch of one class over several runs is no chain).
    Stretch best;
    int at = 0;
    for (const auto& run : folded.runs) {
        const std::int64_t ops =
            static_cast<std::int64_t>(run.count) * folded.classes[static_cast<size_t>(run.classId)].opsPerInstance();
        if (run.count > 1 && ops > best.ops) best = Stretch{at, run.count, 1, ops};
        at += run.count;
    }
    for (int period : candidatePeriods(folded)) {
        const Stretch s = bestStretch(folded, blocks, period);
        if (s.ops > best.ops) best = s; // ties keep the shorter period
    }
    if (best.ops == 0) return std::nullopt;
    LayerStack stack;
    stack.period = best.period;
    const int whole = best.length / best.period * best.period;
    std::set<std::string> labels;
    for (int i = best.first; i < best.first + whole; ++i) {
        stack.layers.push_back(blocks[size_t(i)]);
        const std::string& label = folded.classes[size_t(blocks[size_t(i)].first)].label;
        if (i < best.first + best.period && labels.insert(label).second) stack.label += (stack.label.empty() ? "" : "+") + label;
    }
    for (int i = 0; i < static_cast<int>(blocks.size()); ++i) {
        if (i >= best.first && i < best.first + whole) continue;
        if (!labels.count(folded.classes[size_t(blocks[size_t(i)].first)].label)) continue;
        (i < best.first ? stack.layersBefore : stack.layersAfter) += 1;
    }
    return stack;
}

std::vector<int> containerLayersOfStage(const std::vector<int>& split, int period, int layersPerPeriod, int layersBefore,
                                        int layersAfter)
{
    std::vector<int> out;
    for (int n : split) out.push_back(n / std::max(1, period) * layersPerPeriod);
    if (!out.empty()) {
        out.front() += layersBefore;
        out.back() += layersAfter;
    }
    return out;
}

std::vector<int> evenSplit(int layers, int stages, int period)
{
    const int units = layers / period;
    std::vector<int> counts(static_cast<size_t>(stages), units / stages);
    for (int extra = 0; extra < units % stages; ++extra) counts[static_cast<size_t>(1 + extra % (stages - 1))] += 1;
    for (int& n : counts) n *= period;
    return counts;
}

std::vector<int> splitWithEnds(int layers, int stages, int first, int last, int period)
{
    const std::string flag = "--stage-layers " + std::to_string(first) + "," + std::to_string(last);
    if (stages < 2) throw InputError(flag + ": needs --pipeline 2 or more");
    if (period > 1 && (first % period != 0 || last % period != 0))
        throw InputError(flag + ": the layers repeat in a pattern of " + std::to_string(period) +
                         " (e.g. local and global attention), and a stage holds whole patterns: give multiples of " +
                         std::to_string(period));
    if (period > 1) {
        std::vector<int> counts = splitWithEnds(layers / period, stages, first / period, last / period, 1);
        for (int& n : counts) n *= period;
        return counts;
    }
    const int middle = layers - first - last;
    if (first < 1 || last < 1 || (stages == 2 ? middle != 0 : middle < stages - 2))
        throw InputError(flag + ": " + std::to_string(layers) + " layers over " + std::to_string(stages) +
                         " stages leave " + (stages == 2 ? "the two stages " + std::to_string(first + last) + " in all"
                                                         : std::to_string(middle) + " for " + std::to_string(stages - 2) +
                                                               " middle stages") +
                         "; every stage needs at least one layer");
    std::vector<int> counts = {first};
    if (stages > 2) {
        // The middle stages as evenSplit shares among them (the extras from the second stage on).
        std::vector<int> mid(static_cast<size_t>(stages - 2), middle / (stages - 2));
        for (int extra = 0; extra < middle % (stages - 2); ++extra) mid[static_cast<size_t>(extra)] += 1;
        counts.insert(counts.end(), mid.begin(), mid.end());
    }
    counts.push_back(last);
    return counts;
}

std::pair<int, int> parseStageLayers(const std::string& word)
{
    if (word == "auto" || word == "even") return {0, 0};
    const auto comma = word.find(',');
    auto number = [&](std::string_view digits) {
        int n = 0;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
        return ec == std::errc() && end == digits.data() + digits.size() && n >= 1 && n <= 1000000 ? n : 0;
    };
    if (comma != std::string::npos) {
        const int first = number(std::string_view(word).substr(0, comma)), last = number(std::string_view(word).substr(comma + 1));
        if (first > 0 && last > 0) return {first, last};
    }
    throw InputError("--stage-layers '" + word +
                     "': use auto, even, or F,L (the first and the last stage's layers, each at least 1)");
}

std::string stageLayersWord(const std::vector<int>& split, int period)
{
    int layers = 0;
    for (int n : split) layers += n;
    if (split.size() < 2 || split == evenSplit(layers, static_cast<int>(split.size()), period)) return "even";
    return std::to_string(split.front()) + "," + std::to_string(split.back());
}

StageSplit splitIntoStages(const FoldedGraph& folded, const PipelineSchedule& schedule, const std::vector<int>& counts)
{
    const std::optional<LayerStack> stack = layerStack(folded);
    const int p = schedule.stages;
    if (!stack) throw InputError("--pipeline " + std::to_string(p) + ": " + kNoLayerStack);
    const int layers = static_cast<int>(stack->layers.size()), q = stack->period;
    // What a stage holds whole: a layer, or a period of a pattern of kinds.
    const std::string unit = q == 1 ? "layers" : "patterns of " + std::to_string(q) + " layers";
    if (p > layers / q)
        throw InputError("--pipeline " + std::to_string(p) + ": more stages than the " + std::to_string(layers / q) + " " + unit +
                         " of '" + stack->label + "'");
    StageSplit split;
    split.stackLayers = layers;
    split.period = q;
    split.label = stack->label;
    const int v = schedule.virtualStages;
    if (counts.empty()) {
        split.countOfStage = evenSplit(layers, p, q);
        if (v > 1 && (layers / q) % (p * v) != 0)
            throw InputError("--schedule interleaved:" + std::to_string(v) + ": " + std::to_string(v) +
                             " chunks per device do not divide the " + std::to_string(layers / q / p) + " " + unit +
                             " per stage of '" + stack->label + "' (" + std::to_string(layers / q) + " over " +
                             std::to_string(p) + " stages)");
    } else {
        int total = 0;
        for (int n : counts) total += n;
        if (static_cast<int>(counts.size()) != p || total != layers ||
            std::any_of(counts.begin(), counts.end(), [&](int n) { return n < q || n % q != 0; }))
            throw InputError("--stage-layers: the stages' layers must be " + std::to_string(p) + " counts of at least " +
                             (q == 1 ? "1" : "one pattern, in whole patterns of " + std::to_string(q) + ",") +
                             " adding up to the " + std::to_string(layers) + " layers of '" + stack->label + "'");
        for (int s = 0; s < p; ++s)
            if (v > 1 && counts[static_cast<size_t>(s)] / q % v != 0)
                throw InputError("--stage-layers: stage " + std::to_string(s + 1) + "'s " +
                                 std::to_string(counts[static_cast<size_t>(s)] / q) + " " + unit + " do not divide into the " +
                                 std::to_string(v) + " chunks per device of --schedule interleaved:" + std::to_string(v));
        split.countOfStage = counts;
    }
    int first = 0;
    for (int s = 0; s < p; ++s) {
        split.firstOfStage.push_back(first);
        first += split.countOfStage[static_cast<size_t>(s)];
    }
    return split;
}

namespace {

/// The state of balanceStages: every value asked so far, exact or known to be at least the bar
/// it was asked under.
class SplitSearch {
public:
    SplitSearch(int layers, const PipelineSchedule& schedule, const StageValue& value, double bar) :
        layers_(layers), stages_(schedule.stages), step_(std::max(1, schedule.virtualStages)), value_(value), bar_(bar)
    {
    }

    /// Whether role's stage of `count` layers is under `limit` (strictly, or at most).
    bool under(int role, int count, double limit, bool strict)
    {
        auto it = known_.find({role, count});
        const double askBar = strict ? limit : std::nextafter(limit, std::numeric_limits<double>::infinity());
        if (it != known_.end() && !it->second.exact && it->second.v < std::min(askBar, bar_)) known_.erase(it), it = known_.end();
        if (it == known_.end()) {
            const double bar = std::min(askBar, bar_);
            const double v = value_(role, count, bar);
            it = known_.emplace(std::make_pair(role, count), Known{v < bar ? v : bar, v < bar}).first;
        }
        if (!it->second.exact) return false; // at least its bar, which is at least the limit asked
        return strict ? it->second.v < limit : it->second.v <= limit;
    }
    /// Whether role's stage of `count` layers is known, without asking, to be at or over `limit`.
    bool knownNotUnder(int role, int count, double limit) const
    {
        const auto it = known_.find({role, count});
        return it != known_.end() && it->second.v >= limit;
    }
    int chunk() const { return step_; }
    /// The split's slowest stage when every stage is under `limit` (strictly); else infinity.
    double valueOf(const std::vector<int>& split, double limit)
    {
        double most = 0;
        for (int role : roles()) {
            const int count = split[static_cast<size_t>(role == 0 ? 0 : role == 1 ? 1 : stages_ - 1)];
            if (!under(role, count, limit, true)) return std::numeric_limits<double>::infinity();
            most = std::max(most, known_.at({role, count}).v);
        }
        return most;
    }
    /// The most layers role's stage can hold under `limit` (a multiple of the chunks), searched
    /// from `hint` by doubling steps and then halving them (a few values even for long runs);
    /// 0 when not even the fewest are under it.
    int most(int role, double limit, bool strict, int hint)
    {
        const int cap = role == 1 ? (layers_ - 2 * step_) / (stages_ - 2) / step_ * step_ : layers_ - (stages_ - 1) * step_;
        if (cap < step_) return 0;
        auto ok = [&](int units) { return under(role, units * step_, limit, strict); };
        const int top = cap / step_;
        int good = 0, bad = top + 1; // in chunks: `good` is under (0: none known), `bad` is not
        const int from = std::clamp(hint / step_, 1, top);
        if (ok(from)) {
            good = from;
            for (int jump = 1; good < top; jump *= 2) {
                const int next = std::min(top, good + jump);
                if (!ok(next)) {
                    bad = next;
                    break;
                }
                good = next;
            }
        } else {
            bad = from;
            for (int jump = 1; bad > 1; jump *= 2) {
                const int next = std::max(1, bad - jump);
                if (ok(next)) {
                    good = next;
                    break;
                }
                bad = next;
            }
            if (good == 0) return 0;
        }
        while (bad - good > 1) {
            const int mid = good + (bad - good) / 2;
            (ok(mid) ? good : bad) = mid;
        }
        return good * step_;
    }
    /// A Megatron split whose first stage holds at most `a` layers, the middle ones at most `c`
    /// each, the last at most `b`. `centred`: the middle of each range (every stage keeps some
    /// room under the limit, so the next round's limit drops the most); else the most per
    /// middle stage, then the ends as even as they can be (the tie rule).
    std::optional<std::vector<int>> pick(int a, int b, int c, bool centred) const
    {
        if (a < step_ || b < step_) return std::nullopt;
        if (stages_ == 2) return layers_ <= a + b ? std::optional(ends(layers_, a, b, 0, centred)) : std::nullopt;
        int most = 0, fewest = 0; // per middle stage, that leave the ends between 2 chunks and a + b
        for (int mid = c; mid >= step_; mid -= step_) {
            const int rest = layers_ - (stages_ - 2) * mid;
            if (rest < 2 * step_) continue;
            if (rest > a + b) break; // fewer per middle stage leaves the ends more
            if (most == 0) most = mid;
            fewest = mid;
            if (!centred) break;
        }
        if (most == 0) return std::nullopt;
        const int mid = centred ? (most + fewest) / 2 / step_ * step_ : most;
        return ends(layers_ - (stages_ - 2) * mid, a, b, mid, centred);
    }
    std::vector<int> roles() const { return stages_ > 2 ? std::vector<int>{2, 0, 1} : std::vector<int>{2, 0}; }
    int layers() const { return layers_; }

private:
    std::vector<int> ends(int rest, int a, int b, int mid, bool centred) const
    {
        const int low = std::max(step_, rest - b), high = std::min(a, rest - step_);
        const int first = centred ? (low + high) / 2 / step_ * step_ : std::clamp(rest / 2 / step_ * step_, low, high);
        std::vector<int> split = {first};
        split.insert(split.end(), static_cast<size_t>(stages_ - 2), mid);
        split.push_back(rest - first);
        return split;
    }
    struct Known {
        double v;   ///< the value, or the bar it is known to reach
        bool exact;
    };
    int layers_, stages_, step_;
    const StageValue& value_;
    double bar_;
    std::map<std::pair<int, int>, Known> known_;
};

} // namespace

std::vector<int> balanceStages(int layers, const PipelineSchedule& schedule, const std::vector<int>& start,
                               const StageValue& value, double bar)
{
    const int p = schedule.stages;
    if (p < 2 || static_cast<int>(start.size()) != p) return start;
    SplitSearch search(layers, schedule, value, bar);
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<int> hints = {start.front(), p > 2 ? start[1] : 0, start.back()};
    const std::vector<int> roles = p > 2 ? std::vector<int>{2, 0, 1} : std::vector<int>{2, 0};
    // Some stage of any split holds at least the layers the start gives it (they add up to the
    // same), so when every stage of the start is at the bar, so is every split.
    bool anyUnder = false;
    for (int role : roles) anyUnder = search.under(role, hints[static_cast<size_t>(role)], bar, true) || anyUnder;
    if (!anyUnder) return start;
    double best = search.valueOf(start, bar);
    std::optional<std::vector<int>> found;
    for (;;) {
        // Every stage strictly under the best so far (and the bar): the most layers each role
        // can hold there, and a split within them; none means nothing beats the best. A role
        // already known to reach the limit at its hint holds less than that: the others are
        // searched first, and it only when they leave it something to do.
        const double limit = std::min(best, bar);
        std::vector<int> most = {0, 0, 0};
        std::vector<int> later;
        for (int role : roles) {
            if (search.knownNotUnder(role, hints[static_cast<size_t>(role)], limit)) {
                most[static_cast<size_t>(role)] = hints[static_cast<size_t>(role)] - search.chunk();
                later.push_back(role);
            } else {
                most[static_cast<size_t>(role)] = search.most(role, limit, true, hints[static_cast<size_t>(role)]);
            }
        }
        if (!search.pick(most[0], most[2], most[1], false)) break;
        for (int role : later)
            most[static_cast<size_t>(role)] = search.most(role, limit, true, hints[static_cast<size_t>(role)]);
        hints = most;
        const auto split = search.pick(most[0], most[2], most[1], true);
        if (!split) break;
        const double v = search.valueOf(*split, limit);
        if (!(v < limit)) break; // a value that decreased with more layers: stop rather than loop
        best = v;
        found = split;
    }
    if (!found || !(best < inf)) return start;
    if (search.valueOf(start, std::nextafter(best, inf)) <= best) return start;
    // Ties: the split of the most layers each role holds at the optimum, so that the answer does
    // not depend on the path (or the bar) that found it.
    const int a = search.most(0, best, false, hints[0]), b = search.most(2, best, false, hints[2]);
    const int c = p > 2 ? search.most(1, best, false, hints[1]) : 0;
    const auto split = search.pick(a, b, p > 2 ? c : 0, false);
    return split ? *split : *found;
}

StageCutter::StageCutter(const Graph& graph, const FoldedGraph& folded) :
    graph_(graph), order_(graph.topologicalOrder()), producers_(graph.producers()), consumers_(graph.consumers())
{
    const std::optional<LayerStack> stack = layerStack(folded);
    if (!stack) throw InputError(std::string("--pipeline: ") + kNoLayerStack);
    layers_ = static_cast<int>(stack->layers.size());
    period_ = stack->period;
    label_ = stack->label;
    // Each op's place: its layer of the stack; else before the stack's first op in topological
    // order (the first stage's) or after it (the last stage's).
    placeOfOp_.assign(graph.ops.size(), kAfterRun);
    std::vector<char> inStack(graph.ops.size(), 0);
    for (int i = 0; i < layers_; ++i) {
        const auto [classId, instance] = stack->layers[static_cast<size_t>(i)];
        for (OpId op : folded.classes.at(static_cast<size_t>(classId)).instances.at(static_cast<size_t>(instance)).ops) {
            placeOfOp_[static_cast<size_t>(op)] = i;
            inStack[static_cast<size_t>(op)] = 1;
        }
    }
    const auto [firstClass, firstInstance] = stack->layers.front();
    const OpId stackStart =
        folded.classes.at(static_cast<size_t>(firstClass)).instances.at(static_cast<size_t>(firstInstance)).ops.front();
    for (OpId op : order_) {
        if (op == stackStart) break;
        if (!inStack[static_cast<size_t>(op)]) placeOfOp_[static_cast<size_t>(op)] = kBeforeRun;
    }
    countContainerLayers(*stack);
    rankOfOp_.assign(graph.ops.size(), 0);
    opsOfPlace_.assign(static_cast<size_t>(layers_) + 2, {});
    for (size_t i = 0; i < order_.size(); ++i) {
        const OpId op = order_[i];
        rankOfOp_[static_cast<size_t>(op)] = static_cast<int>(i);
        const int place = placeOfOp_[static_cast<size_t>(op)];
        opsOfPlace_[static_cast<size_t>(place == kBeforeRun ? 0 : place == kAfterRun ? 1 : 2 + place)].push_back(op);
    }
}

void StageCutter::countContainerLayers(const LayerStack& stack)
{
    layersPerPeriod_ = period_;
    layersBefore_ = stack.layersBefore;
    layersAfter_ = stack.layersAfter;
    // "layers.12/attn/q" is layer 12 of the container "layers" when the label is "layers.*".
    const std::string label = label_.substr(0, label_.find('+'));
    if (label.size() < 3 || !label.ends_with(".*")) return;
    const std::string prefix = label.substr(0, label.size() - 1);
    std::set<int> before, inPeriod, inStack, after;
    for (size_t op = 0; op < graph_.ops.size(); ++op) {
        const std::string& name = graph_.ops[op].name;
        if (name.rfind(prefix, 0) != 0) continue;
        int index = -1;
        const auto [end, ec] = std::from_chars(name.data() + prefix.size(), name.data() + name.size(), index);
        if (ec != std::errc() || (end != name.data() + name.size() && *end != '/' && *end != '.')) continue;
        const int place = placeOfOp_[op];
        if (place == kBeforeRun)
            before.insert(index);
        else if (place == kAfterRun)
            after.insert(index);
        else {
            inStack.insert(index);
            if (place < period_) inPeriod.insert(index);
        }
    }
    // Whole layers in every period only (a fold that cut a layer at a period's edge counts blocks).
    if (inPeriod.empty() || inStack.size() != inPeriod.size() * static_cast<size_t>(layers_ / period_)) return;
    layersPerPeriod_ = static_cast<int>(inPeriod.size());
    for (int i : inStack) before.erase(i), after.erase(i);
    layersBefore_ = static_cast<int>(before.size());
    layersAfter_ = static_cast<int>(after.size());
}

std::vector<std::string> StageCutter::modulesOutsideRun(bool beforeRun) const
{
    const std::string prefix = label_.substr(0, label_.find('*'));
    std::vector<std::string> out;
    for (OpId id : order_) {
        if (placeOfOp_[static_cast<size_t>(id)] != (beforeRun ? kBeforeRun : kAfterRun)) continue;
        const std::string& name = graph_.op(id).name;
        if (!prefix.empty() && name.rfind(prefix, 0) == 0) continue;
        const std::string module = name.substr(0, name.find('/'));
        if (std::find(out.begin(), out.end(), module) == out.end()) out.push_back(module);
    }
    return out;
}

StageGraph StageCutter::cut(int stage, int stages, int first, int count) const
{
    if (stage < 0 || stage >= stages || first < 0 || count < 1 || first + count > layers_)
        throw std::logic_error("StageCutter: no such stage");
    auto mine = [&](OpId op) {
        if (op < 0) return false;
        const int place = placeOfOp_[static_cast<size_t>(op)];
        if (place == kBeforeRun) return stage == 0;
        if (place == kAfterRun) return stage == stages - 1;
        return place >= first && place < first + count;
    };
    // The stage's ops in topological order: only theirs are visited (a stage of a deep model is
    // a small part of it).
    std::vector<OpId> ops;
    if (stage == 0) ops = opsOfPlace_[0];
    for (int i = first; i < first + count; ++i)
        ops.insert(ops.end(), opsOfPlace_[static_cast<size_t>(2 + i)].begin(), opsOfPlace_[static_cast<size_t>(2 + i)].end());
    if (stage == stages - 1) ops.insert(ops.end(), opsOfPlace_[1].begin(), opsOfPlace_[1].end());
    std::sort(ops.begin(), ops.end(), [&](OpId x, OpId y) { return rankOfOp_[static_cast<size_t>(x)] < rankOfOp_[static_cast<size_t>(y)]; });
    // The tensors the stage touches, received ones first (the batch is read from the first
    // input of rank >= 2, core/cost/cost_model.cpp graphBatchOf), then the rest in id order.
    std::vector<TensorId> touched;
    for (OpId id : ops) {
        const Op& op = graph_.op(id);
        touched.insert(touched.end(), op.inputs.begin(), op.inputs.end());
        touched.insert(touched.end(), op.outputs.begin(), op.outputs.end());
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    auto received = [&](TensorId t) {
        const OpId producer = producers_[static_cast<size_t>(t)];
        return producer >= 0 && !mine(producer);
    };
    std::vector<TensorId> order;
    for (TensorId t : touched)
        if (received(t)) order.push_back(t);
    for (TensorId t : touched)
        if (!received(t)) order.push_back(t);
    StageGraph result;
    Graph& out = result.graph;
    out.name = graph_.name + " (stage " + std::to_string(stage + 1) + " of " + std::to_string(stages) + ")";
    std::map<TensorId, TensorId> newId;
    for (TensorId t : order) {
        const Tensor& old = graph_.tensor(t);
        TensorRole role = old.role;
        const auto& readers = consumers_[static_cast<size_t>(t)];
        const bool sent = std::any_of(readers.begin(), readers.end(), [&](OpId c) { return !mine(c); });
        const bool sends = sent && mine(producers_[static_cast<size_t>(t)]);
        if (received(t)) role = TensorRole::Input;
        if (sent && role == TensorRole::Activation) role = TensorRole::Output;
        newId[t] = out.addTensor(old.name, old.shape, old.dtype, role);
        if (received(t)) {
            result.receivedBytes += static_cast<double>(old.bytes());
            result.receivedTensors.push_back(newId[t]);
        }
        if (sends) {
            result.sentBytes += static_cast<double>(old.bytes());
            result.sentTensors.push_back(newId[t]);
        }
    }
    for (OpId id : ops) {
        const Op& op = graph_.op(id);
        std::vector<TensorId> ins, outs;
        for (TensorId t : op.inputs) ins.push_back(newId.at(t));
        for (TensorId t : op.outputs) outs.push_back(newId.at(t));
        out.addOp(op.name, op.kind, std::move(ins), std::move(outs), op.einsum, op.attrs);
    }
    return result;
}

} // namespace tp
