// The graph view's scene: one card per run of a block class, their ops, collective badges and
// the edges between cards, built from the document's plan in named steps (SceneBuilder).
#include <algorithm>
#include <cmath>

#include "graphitems.h"
#include "graphlayout.h"
#include "graphminimap.h"
#include "graphview.h"
#include "presentation.h"

namespace tp {

using namespace graphview;

namespace {

/// What a collapsed card shows of an instance: its time, collectives and sharding strip.
struct InstanceSummary {
    double seconds = 0;
    std::map<CollectiveKind, QStringList> kinds;
    std::vector<QColor> strip;
};

/// Builds the scene of one plan into `scene` and `index`; what dot has not laid out yet is
/// left in `layoutsToRequest`.
class SceneBuilder {
public:
    SceneBuilder(QGraphicsScene& scene, SceneIndex& index, const PlanOutcome& plan, const QStringList& expanded,
                 const std::map<int, CardLayout>& cardLayouts) :
        scene_(scene),
        index_(index),
        g(plan.workspace->model.graph),
        f(plan.workspace->folded),
        model(*plan.workspace->costModel),
        stage(plan.workspace->stage),
        pipeline(plan.pipeline),
        r(plan.result),
        expanded_(expanded),
        cardLayouts_(cardLayouts)
    {}

    void build()
    {
        indexOps();
        collectCollectives();
        for (size_t ri = 0; ri < f.runs.size(); ++ri) addRun(static_cast<int>(ri));
        addCardEdges();
    }

    std::map<int, LayoutInput> layoutsToRequest; ///< expanded cards dot has not laid out yet

private:
    static QString tr(const char* text) { return GraphView::tr(text); }

    /// Each op's topological position, and which card shows it: runs are cards; siblings show
    /// inside their parent's card.
    void indexOps()
    {
        producers_ = g.producers();
        topoPos_.assign(g.ops.size(), 0);
        const auto order = g.topologicalOrder();
        for (size_t i = 0; i < order.size(); ++i) topoPos_[static_cast<size_t>(order[i])] = static_cast<int>(i);
        std::map<std::pair<int, int>, int> cardOfInstance;
        for (size_t ri = 0; ri < f.runs.size(); ++ri)
            for (int k = 0; k < f.runs[ri].count; ++k)
                cardOfInstance[{f.runs[ri].classId, f.runs[ri].firstInstance + k}] = static_cast<int>(ri);
        for (int pass = 0; pass < 4; ++pass) // nested siblings resolve through their parents
            for (const auto& sg : f.siblings) {
                const auto parent = cardOfInstance.find({sg.parentClass, sg.parentInstance});
                if (parent == cardOfInstance.end()) continue;
                for (int inst : sg.instances) cardOfInstance[{sg.classId, inst}] = parent->second;
            }
        cardOfOp_.assign(g.ops.size(), -1);
        for (size_t op = 0; op < g.ops.size(); ++op) {
            const auto it = cardOfInstance.find({f.classOfOp[op], f.instanceOfOp[op]});
            if (it != cardOfInstance.end()) cardOfOp_[op] = it->second;
        }
    }

    /// Collectives per op of the plan, by kind, with their details for the tooltip.
    void collectCollectives()
    {
        for (const auto& c : r.breakdown.collectives)
            collectivesAt_[c.at][c.kind] << QStringLiteral("%1 %2 over %3: %4, %5")
                                                .arg(QLatin1String(phaseName(c.phase).data()),
                                                     QLatin1String(collectiveName(c.kind).data()),
                                                     QString::fromStdString(model.mesh().axes[static_cast<size_t>(c.axis)].name),
                                                     QString::fromStdString(formatBytes(c.bytes)),
                                                     QString::fromStdString(formatSeconds(c.seconds)));
    }

    InstanceSummary instanceSummary(const BlockInstance& inst) const
    {
        InstanceSummary sum;
        for (OpId op : inst.ops) {
            const auto& ob = r.breakdown.ops[static_cast<size_t>(op)];
            sum.seconds += ob.stepSeconds; // as the outline: hidden communication not counted again
            sum.strip.push_back(shardingColor(classifyOp(model, op, r.strategyOfOp[static_cast<size_t>(op)]).kind));
            if (const auto it = collectivesAt_.find(op); it != collectivesAt_.end())
                for (const auto& [kind, lines] : it->second) sum.kinds[kind] << lines;
        }
        return sum;
    }

    InstanceNodes instanceNodes(int classId, int instance) const
    {
        return layeredLayout(g, f, producers_, topoPos_, classId, instance);
    }

    /// One node's item: an op (coloured by its sharding) or a group of sibling instances.
    QGraphicsItem* addNodeItem(const Node& n, bool dotPlaced)
    {
        const QRectF rect(n.pos.x() - kNodeW / 2, n.pos.y(), kNodeW, kNodeH);
        QGraphicsItem* item = nullptr;
        if (n.op >= 0) {
            const int s = r.strategyOfOp[static_cast<size_t>(n.op)];
            const ShardClass sc = classifyOp(model, n.op, s).kind;
            const QString strategy = QString::fromStdString(
                strategyToString(model.strategies(n.op)[static_cast<size_t>(s)], model.signature(n.op), model.mesh()));
            const QString spec = g.op(n.op).outputs.empty()
                                     ? QString()
                                     : QString::fromStdString(specToString(model.outputSpec(n.op, s, 0), model.mesh()));
            item = new OpNodeItem(rect, shortOpName(g.op(n.op).name), strategy + QStringLiteral("  →  ") + spec,
                                  shardingColor(sc), r.lockedOp[static_cast<size_t>(n.op)]);
            item->setData(KindKey, OpKindItem);
            item->setData(ValueKey, n.op);
            item->setToolTip(tr("%1\n%2 · %3 · %4\nstrategy %5, output %6")
                                 .arg(QString::fromStdString(g.op(n.op).name), QLatin1String(opKindName(g.op(n.op).kind).data()),
                                      QString::fromStdString(model.signature(n.op).equation), shardingClassName(sc), strategy,
                                      spec));
            index_.opItems[n.op] = item;
            if (dotPlaced) index_.dotPlacedOps.insert(n.op);
        } else {
            const auto& sg = f.siblings[static_cast<size_t>(n.group)];
            const auto& sc = f.classes[static_cast<size_t>(sg.classId)];
            item = new OpNodeItem(rect, QStringLiteral("%1  ×%2").arg(QString::fromStdString(sc.label)).arg(sg.instances.size()),
                                  countOf(static_cast<int>(sg.instances.size()), "parallel branch", "parallel branches"),
                                  classColor(sg.classId), false);
            item->setToolTip(tr("Parallel identical branches (e.g. experts), %1 ops each").arg(sc.opsPerInstance()));
        }
        scene_.addItem(item);
        return item;
    }

    /// The edges between one card's nodes: dot's splines where it has them, else arrows.
    void addNodeEdges(const InstanceNodes& in, const CardLayout* dot, QPointF dotOrigin)
    {
        const std::vector<Node>& nodes = in.nodes;
        for (const auto& [a, b] : in.edges) {
            const Node& na = nodes[static_cast<size_t>(a)];
            if (dot) {
                if (const auto path = dot->edges.find({a, b}); path != dot->edges.end()) {
                    addSplineEdge(scene_, path->second, dotOrigin, na.pos + QPointF(0, kNodeH));
                    continue;
                }
            }
            const Node& nb = nodes[static_cast<size_t>(b)];
            const int span = nb.rank - na.rank;
            double side = 0;
            if (span > 1 && std::abs(na.pos.x() - nb.pos.x()) < 1)
                side = (na.pos.x() >= 0 ? 1 : -1) * (kNodeW * 0.75 + 10 * span);
            addEdge(scene_, na.pos + QPointF(0, kNodeH), nb.pos, side, QString());
        }
    }

    /// Collective badges on the edges leaving the op after which they happen.
    void addBadges(const InstanceNodes& in)
    {
        for (const auto& n : in.nodes) {
            if (n.op < 0) continue;
            const auto it = collectivesAt_.find(n.op);
            if (it == collectivesAt_.end()) continue;
            auto* badge = new BadgeItem(n.pos + QPointF(0, kNodeH + kGapY * 0.42), pillsFor(it->second));
            QStringList lines;
            for (const auto& [kind, ls] : it->second) lines << ls;
            badge->setToolTip(tr("After %1:\n%2").arg(QString::fromStdString(g.op(n.op).name), lines.join(QLatin1Char('\n'))));
            badge->setZValue(2);
            scene_.addItem(badge);
            ++index_.badges;
        }
    }

    /// The ops of one instance inside an expanded card whose body starts at `top`.
    void drawOps(InstanceNodes& in, double top, const CardLayout* dot)
    {
        const QPointF dotOrigin(-(dot ? dot->width : 0) / 2, top);
        for (auto& n : in.nodes) n.pos.setY(top + n.rank * (kNodeH + kGapY));
        if (dot)
            for (size_t i = 0; i < in.nodes.size(); ++i) // n.pos is a node's top centre; dot gives centres
                in.nodes[i].pos = dotOrigin + dot->centers[i] - QPointF(0, kDotNodeH / 2);
        for (const auto& n : in.nodes) addNodeItem(n, dot != nullptr);
        addNodeEdges(in, dot, dotOrigin);
        addBadges(in);
    }

    /// Under a memory limit the search may mix two layouts across a run's instances: how many
    /// differ from the first, which the folded card shows.
    int instancesWithAnotherLayout(const Run& run) const
    {
        const BlockClass& bc = f.classes[static_cast<size_t>(run.classId)];
        const BlockInstance& firstInstance = bc.instances[static_cast<size_t>(run.firstInstance)];
        int differing = 0;
        for (int a = 1; a < run.count; ++a) {
            const BlockInstance& other = bc.instances[static_cast<size_t>(run.firstInstance + a)];
            for (size_t k = 0; k < other.ops.size(); ++k) {
                const auto o = static_cast<size_t>(other.ops[k]), first = static_cast<size_t>(firstInstance.ops[k]);
                if (r.strategyOfOp[o] != r.strategyOfOp[first] || r.recomputeOfOp[o] != r.recomputeOfOp[first]) {
                    ++differing;
                    break;
                }
            }
        }
        return differing;
    }

    /// Dot's layout of this run's card when it has one; else null, and dot is asked for it.
    const CardLayout* dotLayoutOf(int ri, const InstanceNodes& rep, bool isExpanded)
    {
        const auto it = cardLayouts_.find(ri);
        if (isExpanded && it == cardLayouts_.end()) layoutsToRequest.emplace(ri, dotInputOf(rep));
        return isExpanded && it != cardLayouts_.end() && it->second.ok && it->second.centers.size() == rep.nodes.size()
                   ? &it->second
                   : nullptr;
    }

    /// Every stage's layers of the model's layer container (the layers of the stack's kind
    /// before and after it included): what the band and its texts count.
    std::vector<int> containerLayers() const
    {
        return containerLayersOfStage(stage.layersOfStage, stage.period, stage.layersPerPeriod, stage.layersBefore,
                                      stage.layersAfter);
    }

    /// Whether run `ri` is the first of the stack the stages split: the run itself (a period of
    /// one layer), or the first run of one of the pattern's kinds (Gemma-3's five local layers).
    bool startsStageStack(int ri) const
    {
        const Run& run = f.runs[static_cast<size_t>(ri)];
        auto ofStack = [&](const Run& r) {
            const std::string& label = f.classes[static_cast<size_t>(r.classId)].label;
            const std::string& kinds = stage.layerLabel;
            for (size_t at = 0; at <= kinds.size();) {
                const size_t end = std::min(kinds.find('+', at), kinds.size());
                if (kinds.compare(at, end - at, label) == 0) return true;
                at = end + 1;
            }
            return false;
        };
        if (stage.stage < 0 || !ofStack(run)) return false;
        if (stage.period <= 1) return run.count == stage.layers;
        for (int before = 0; before < ri; ++before)
            if (ofStack(f.runs[static_cast<size_t>(before)])) return false;
        return true;
    }

    /// On a pipeline stage's plan, the first card of the stack the stages split says where the
    /// stage lies in the whole model: "stage 8 of 8: 84-95 of 96 (8 stages of 12)", first on the
    /// card's info line.
    QString stageBand(int ri) const
    {
        if (!startsStageStack(ri)) return {};
        const std::vector<int> layers = containerLayers();
        int total = 0, first = 0;
        for (size_t s = 0; s < layers.size(); ++s) {
            if (static_cast<int>(s) < stage.stage) first += layers[s];
            total += layers[s];
        }
        const int mine = layers.at(static_cast<size_t>(stage.stage));
        const auto [low, high] = std::minmax_element(layers.begin(), layers.end());
        const QString sizes = *low == *high ? QString::number(*low) : QStringLiteral("%1-%2").arg(*low).arg(*high);
        return tr("stage %1 of %2: %3-%4 of %5 (%2 stages of %6)")
            .arg(stage.stage + 1)
            .arg(stage.schedule.stages)
            .arg(first)
            .arg(first + mine - 1)
            .arg(total)
            .arg(sizes);
    }

    /// The band above the card of the run the stages split: every stage, as wide as its layers,
    /// with its layers in the whole model, its step and memory where the planner solved it.
    void addStageBand(const QRectF& cardRect, const QColor& color)
    {
        std::vector<StageSegment> segments;
        // The stages this card's plan runs: its own, and the middle stages it stands for.
        int standsFor = 1;
        if (pipeline)
            for (const auto& st : pipeline->stages)
                if (st.stage == stage.stage) standsFor = st.standsFor;
        int first = 0;
        const std::vector<int> counts = containerLayers();
        for (size_t s = 0; s < counts.size(); ++s) {
            const int layers = counts[s];
            StageSegment seg;
            seg.layers = layers;
            seg.shown = stage.stage <= static_cast<int>(s) && static_cast<int>(s) < stage.stage + standsFor;
            seg.labels = {tr("stage %1: %2 layers").arg(s + 1).arg(layers), QStringLiteral("%1 · %2").arg(s + 1).arg(layers),
                          QString::number(s + 1)};
            seg.tooltip = tr("stage %1 of %2: %3 layers, %4-%5")
                              .arg(s + 1)
                              .arg(stage.layersOfStage.size())
                              .arg(layers)
                              .arg(first)
                              .arg(first + layers - 1);
            if (pipeline)
                for (const auto& st : pipeline->stages)
                    if (st.stage <= static_cast<int>(s) && static_cast<int>(s) < st.stage + st.standsFor)
                        seg.tooltip += tr("; step %1, %2 per device")
                                           .arg(QString::fromStdString(formatSeconds(st.stepSeconds())),
                                                QString::fromStdString(formatBytes(st.result.breakdown.perDeviceBytes)));
            seg.tooltip += seg.shown ? tr(" (the plan shown)") : tr("; click to show its plan");
            index_.stageBand.push_back(seg.labels[1] + (seg.shown ? QStringLiteral(" *") : QString()));
            segments.push_back(std::move(seg));
            first += layers;
        }
        constexpr double kBandH = 18, kBandGap = 6;
        auto* band = new StageBandItem(QRectF(cardRect.left(), cardRect.top() - kBandH - kBandGap, cardRect.width(), kBandH),
                                       std::move(segments), color);
        index_.stageSegments = band->segmentRects();
        scene_.addItem(band);
    }

    /// One run: its card (the first instance's ops when expanded), or, unfolded, one card per
    /// instance inside the run's frame.
    void addRun(int ri)
    {
        const Run& run = f.runs[static_cast<size_t>(ri)];
        const BlockClass& bc = f.classes[static_cast<size_t>(run.classId)];
        const QString label = QString::fromStdString(bc.label);
        const bool isExpanded = expanded_.contains(label);
        // A run of several instances shows them one card each when its instances are unfolded.
        const bool unfolded = run.count > 1 && expanded_.contains(instancesViewKey(label));
        QString title = run.count > 1 ? QStringLiteral("%1   ×%2").arg(label).arg(run.count) : label;
        if (const int differing = instancesWithAnotherLayout(run); differing > 0)
            title += tr("   (%1 with another layout)").arg(differing);

        // The card shows the run's first instance (every instance has the same ops).
        InstanceNodes rep = instanceNodes(run.classId, run.firstInstance);
        const InstanceSummary repSummary = instanceSummary(bc.instances[static_cast<size_t>(run.firstInstance)]);
        const QString band = stageBand(ri);
        const QString info = (band.isEmpty() ? QString() : band + QStringLiteral(" · ")) +
                             countOf(bc.opsPerInstance(), "op", "ops") + QStringLiteral(" · ") +
                             QString::fromStdString(formatSeconds(repSummary.seconds)) +
                             (run.count > 1 ? tr(" each") : QString());
        const CardLayout* dot = dotLayoutOf(ri, rep, isExpanded);
        // The size of one instance's card (every instance of the run has the same shape).
        double width = std::max(kMinCardW, double(rep.widest) * (kNodeW + kGapX) - kGapX + 2 * kCardPad + (isExpanded ? 120 : 0));
        double height = isExpanded ? kCardHeader + kCardPad + rep.ranks * (kNodeH + kGapY) - kGapY + kCardPad + 8 : kCollapsedH;
        if (dot) {
            width = std::max(kMinCardW, dot->width + 2 * kCardPad);
            height = kCardHeader + kCardPad + dot->height + kCardPad;
        }
        const double outerWidth = unfolded ? width + 2 * kInstancePad : width;
        const double outerHeight =
            unfolded ? kCardHeader + kInstancePad + run.count * (height + kInstanceGap) - kInstanceGap + kInstancePad : height;
        const QRectF cardRect(-outerWidth / 2, y_, outerWidth, outerHeight);
        auto* card = new CardItem(
            cardRect, title, unfolded ? countOf(run.count, "instance", "instances") + QStringLiteral(" · ") + info : info,
            classColor(run.classId), isExpanded, true, unfolded ? std::vector<QColor>() : repSummary.strip,
            unfolded ? std::vector<Pill>() : pillsFor(repSummary.kinds), run.count > 1 ? run.count : 0, unfolded);
        card->setData(KindKey, CardKindItem);
        card->setData(ValueKey, static_cast<int>(index_.cards.size()));
        card->setToolTip((run.count > 1
                              ? tr("%1: double-click to %2 its ops; click %3 to %4 its %5 instances")
                                    .arg(title, isExpanded ? tr("hide") : tr("show"),
                                         unfolded ? QStringLiteral("−") : QStringLiteral("+"), unfolded ? tr("fold") : tr("show"))
                                    .arg(run.count)
                              : tr("%1: double-click to %2").arg(title, isExpanded ? tr("collapse") : tr("expand"))) +
                         QStringLiteral("\n") + info);
        scene_.addItem(card);
        if (!band.isEmpty()) addStageBand(cardRect, classColor(run.classId));
        const int cardIndex = static_cast<int>(index_.cards.size());
        index_.cards.push_back(card);
        index_.cardLabels.push_back(title);
        index_.cardInfos.push_back(info);
        index_.cardClass.push_back(run.classId);
        index_.cardRun.push_back(ri);
        index_.cardToggles.push_back(card->toggleRect());
        cardRects_.push_back(cardRect);

        if (!unfolded) {
            if (isExpanded)
                drawOps(rep, y_ + kCardHeader + kCardPad, dot);
            else
                index_.badges += static_cast<int>(repSummary.kinds.size());
        } else {
            addInstanceCards(ri, cardIndex, QSizeF(width, height), isExpanded, rep, repSummary, dot);
        }
        y_ += outerHeight + kCardGap;
    }

    /// An unfolded run: one card per instance, stacked in the run's frame, chained by arrows.
    void addInstanceCards(int ri, int cardIndex, QSizeF size, bool isExpanded, const InstanceNodes& rep,
                          const InstanceSummary& repSummary, const CardLayout* dot)
    {
        const Run& run = f.runs[static_cast<size_t>(ri)];
        const BlockClass& bc = f.classes[static_cast<size_t>(run.classId)];
        const QString label = QString::fromStdString(bc.label);
        double top = y_ + kCardHeader + kInstancePad;
        for (int k = 0; k < run.count; ++k) {
            const int instance = run.firstInstance + k;
            const BlockInstance& ik = bc.instances[static_cast<size_t>(instance)];
            const InstanceSummary sum = k == 0 ? repSummary : instanceSummary(ik);
            const QRectF rect(-size.width() / 2, top, size.width(), size.height());
            const QString name = instanceLabel(g, ik);
            auto* sub = new CardItem(rect, name.isEmpty() ? tr("instance %1").arg(instance) : name,
                                     countOf(bc.opsPerInstance(), "op", "ops") + QStringLiteral(" · ") +
                                         QString::fromStdString(formatSeconds(sum.seconds)),
                                     classColor(run.classId), isExpanded, true, sum.strip, pillsFor(sum.kinds), 0, false);
            sub->setData(KindKey, InstanceCardKindItem);
            sub->setData(ValueKey, cardIndex);
            sub->setToolTip(tr("%1, instance %2 of %3 in %4: double-click to %5 the ops")
                                .arg(name)
                                .arg(k + 1)
                                .arg(run.count)
                                .arg(label, isExpanded ? tr("hide") : tr("show")));
            sub->setZValue(0.5);
            scene_.addItem(sub);
            index_.instanceCards.push_back(sub);
            index_.instanceLabels.push_back(name);
            index_.instanceCardRun.push_back(ri);
            index_.instanceCardOf[{run.classId, instance}] = sub;
            if (isExpanded) {
                InstanceNodes nodes = k == 0 ? rep : instanceNodes(run.classId, instance);
                drawOps(nodes, top + kCardHeader + kCardPad, dot && dot->centers.size() == nodes.nodes.size() ? dot : nullptr);
            } else {
                index_.badges += static_cast<int>(sum.kinds.size());
            }
            if (k > 0) addEdge(scene_, QPointF(0, top - kInstanceGap), QPointF(0, top), 0, QString());
            top += size.height() + kInstanceGap;
        }
    }

    /// Edges between cards: a tensor produced in one card and read in another.
    void addCardEdges()
    {
        const auto& producers = producers_;
        const auto& cardOfOp = cardOfOp_;
        const auto& cardRects = cardRects_;
        std::set<std::pair<int, int>> cardEdges;
        for (const auto& op : g.ops)
            for (TensorId t : op.inputs) {
                const OpId p = producers[static_cast<size_t>(t)];
                if (p < 0) continue;
                const int a = cardOfOp[static_cast<size_t>(p)], b = cardOfOp[static_cast<size_t>(op.id)];
                if (a >= 0 && b >= 0 && a != b) cardEdges.insert({a, b});
            }
        for (const auto& [a, b] : cardEdges) {
            const QRectF& ra = cardRects[static_cast<size_t>(a)];
            const QRectF& rb = cardRects[static_cast<size_t>(b)];
            if (b == a + 1) {
                addEdge(scene_, QPointF(0, ra.bottom()), QPointF(0, rb.top()), 0, QString());
                continue;
            }
            // Around the cards in between, on the right.
            double right = std::max(ra.right(), rb.right());
            for (int c = a + 1; c < b; ++c) right = std::max(right, cardRects[static_cast<size_t>(c)].right());
            const QPointF from(ra.right() - 40, ra.bottom()), to(rb.right() - 40, rb.top());
            addEdge(scene_, from, to, right + 50 - from.x(), QString());
        }
    }

    QGraphicsScene& scene_;
    SceneIndex& index_;
    const Graph& g;
    const FoldedGraph& f;
    const CostModel& model;
    const PipelineStageInfo& stage; ///< which pipeline stage the plan is (stage -1: the whole model)
    const std::optional<PipelinePlan>& pipeline; ///< every stage's step and memory, when pipelined
    const SearchResult& r;
    const QStringList expanded_; // a copy: Document::expandedClasses returns a value
    const std::map<int, CardLayout>& cardLayouts_;
    std::vector<OpId> producers_;
    std::vector<int> topoPos_;
    std::vector<int> cardOfOp_;
    std::map<OpId, std::map<CollectiveKind, QStringList>> collectivesAt_;
    std::vector<QRectF> cardRects_;
    double y_ = 0;
};

} // namespace

void GraphView::rebuild()
{
    scene_.clear();
    index_ = {};
    selectionMarker_ = nullptr;
    differenceMarkers_.clear();
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan) return;
    if (layoutWorkspace_ != plan->workspace.get()) {
        cardLayouts_.clear();
        layoutInFlight_.clear();
        layoutWorkspace_ = plan->workspace.get();
    }
    SceneBuilder builder(scene_, index_, *plan, document_->expandedClasses(), cardLayouts_);
    builder.build();
    // Ask dot for the cards it has not laid out, unless the newest job already does.
    bool covered = !builder.layoutsToRequest.empty();
    for (const auto& [run, input] : builder.layoutsToRequest) covered = covered && layoutInFlight_.count(run);
    if (!builder.layoutsToRequest.empty() && !covered) startLayout(std::move(builder.layoutsToRequest));
    scene_.setSceneRect(scene_.itemsBoundingRect().adjusted(-40, -30, 40, 30));
    minimap_->refit();
    showSelection();
    showDifferences();
    // Fit once the view has its real size (it may still be hidden behind the start page).
    if (fitPending_ && isVisible()) {
        fitPending_ = false;
        fitWidth();
    }
    emit sceneRebuilt();
}

} // namespace tp
