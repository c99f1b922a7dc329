#include "graphview.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <QFutureWatcher>
#include <QGraphicsItem>
#include <QGraphicsPathItem>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QWheelEvent>
#include <QtConcurrent/QtConcurrentRun>

#include "layout/layout.h"
#include "presentation.h"

namespace tp {

namespace {

constexpr double kNodeW = 200, kNodeH = 40, kGapX = 22, kGapY = 36;
// Dot's nodes are taller than drawn ones: the extra room below a node holds its collective badges.
constexpr double kDotNodeH = kNodeH + 18;
constexpr double kCardPad = 18, kCardHeader = 34, kCollapsedH = 74, kCardGap = 46, kMinCardW = 360;
// An unfolded run: its instances' cards inside the run's frame.
constexpr double kInstancePad = 14, kInstanceGap = 22;

enum ItemData { KindKey = 0, ValueKey = 1 };
enum ItemKind { OpKindItem = 1, CardKindItem = 2, InstanceCardKindItem = 3 };

QColor classColor(int classId)
{
    // Hues spread by the golden angle so neighbouring classes differ.
    const double hue = std::fmod(0.58 + classId * 0.381966, 1.0);
    return QColor::fromHsvF(static_cast<float>(hue), 0.45f, 0.80f);
}

QFont font(double points, bool bold = false)
{
    QFont f;
    f.setPointSizeF(points);
    f.setBold(bold);
    return f;
}

struct Pill {
    QString text;
    QColor color;
};

void paintPills(QPainter* p, QPointF at, const std::vector<Pill>& pills, bool rightAligned = false)
{
    const QFont f = font(7.5, true);
    const QFontMetricsF fm(f);
    p->setFont(f);
    double total = 0;
    for (const auto& pill : pills) total += fm.horizontalAdvance(pill.text) + 12 + 4;
    double x = rightAligned ? at.x() - total : at.x();
    for (const auto& pill : pills) {
        const double w = fm.horizontalAdvance(pill.text) + 12;
        const QRectF r(x, at.y() - 8, w, 16);
        p->setPen(Qt::NoPen);
        p->setBrush(pill.color);
        p->drawRoundedRect(r, 8, 8);
        p->setPen(Qt::white);
        p->drawText(r, Qt::AlignCenter, pill.text);
        x += w + 4;
    }
}

class OpNodeItem : public QGraphicsItem {
public:
    OpNodeItem(QRectF rect, QString name, QString detail, QColor color, bool locked)
        : rect_(rect), name_(std::move(name)), detail_(std::move(detail)), color_(color), locked_(locked)
    {
    }
    QRectF boundingRect() const override { return rect_.adjusted(-2, -2, 2, 2); }
    void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override
    {
        p->setRenderHint(QPainter::Antialiasing);
        p->setPen(QPen(color_.darker(135), locked_ ? 2.4 : 1.0));
        p->setBrush(color_.lighter(160));
        p->drawRoundedRect(rect_, 6, 6);
        p->setPen(Qt::NoPen);
        p->setBrush(color_);
        p->drawRoundedRect(QRectF(rect_.left(), rect_.top(), 7, rect_.height()), 3, 3);
        p->setPen(QColor(0x20, 0x20, 0x28));
        p->setFont(font(9.5, true));
        const QRectF text = rect_.adjusted(13, 3, -6, -3);
        p->drawText(QRectF(text.left(), text.top(), text.width(), text.height() / 2), Qt::AlignLeft | Qt::AlignVCenter,
                    p->fontMetrics().elidedText(name_, Qt::ElideMiddle, static_cast<int>(text.width() - (locked_ ? 18 : 0))));
        p->setFont(font(8));
        p->setPen(QColor(0x30, 0x30, 0x40));
        p->drawText(QRectF(text.left(), text.center().y(), text.width(), text.height() / 2), Qt::AlignLeft | Qt::AlignVCenter,
                    p->fontMetrics().elidedText(detail_, Qt::ElideRight, static_cast<int>(text.width())));
        if (locked_) {
            const QRectF badge(rect_.right() - 18, rect_.top() + 4, 14, 14);
            p->setPen(Qt::NoPen);
            p->setBrush(QColor(0x33, 0x33, 0x33));
            p->drawRoundedRect(badge, 3, 3);
            p->setPen(Qt::white);
            p->setFont(font(7, true));
            p->drawText(badge, Qt::AlignCenter, QStringLiteral("L"));
        }
    }

private:
    QRectF rect_;
    QString name_, detail_;
    QColor color_;
    bool locked_;
};

class CardItem : public QGraphicsItem {
public:
    enum { Type = UserType + 7 };
    /// `runCount` > 0: the card stands for a run of that many instances and draws the +/- toggle
    /// that unfolds it (`unfolded`: its instances' cards are drawn inside it).
    CardItem(QRectF rect, QString title, QString info, QColor color, bool expanded, bool expandable, std::vector<QColor> strip,
             std::vector<Pill> pills, int runCount, bool unfolded)
        : rect_(rect), title_(std::move(title)), info_(std::move(info)), color_(color), expanded_(expanded), expandable_(expandable),
          strip_(std::move(strip)), pills_(std::move(pills)), runCount_(runCount), unfolded_(unfolded)
    {
    }
    int type() const override { return Type; }
    QRectF boundingRect() const override { return rect_.adjusted(-6, -6, 6, 6); }
    /// The +/- toggle in the header (empty when the card is not a run).
    QRectF toggleRect() const
    {
        if (runCount_ <= 0) return {};
        const QFontMetricsF fm(font(8.5, true));
        const double w = fm.horizontalAdvance(toggleText()) + 16;
        return QRectF(rect_.right() - 10 - w, rect_.top() + (kCardHeader - 20) / 2, w, 20);
    }
    void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override
    {
        p->setRenderHint(QPainter::Antialiasing);
        p->setPen(QPen(color_.darker(120), 1.4));
        p->setBrush(QColor(color_.red(), color_.green(), color_.blue(), unfolded_ ? 16 : 34));
        p->drawRoundedRect(rect_, 10, 10);
        const QRectF header(rect_.left(), rect_.top(), rect_.width(), kCardHeader);
        p->setPen(Qt::NoPen);
        p->setBrush(QColor(color_.red(), color_.green(), color_.blue(), 90));
        p->drawRoundedRect(header, 10, 10);
        p->setPen(QColor(0x15, 0x15, 0x20));
        p->setFont(font(11, true));
        const QString glyph = expandable_ ? (expanded_ ? QStringLiteral("▾ ") : QStringLiteral("▸ ")) : QString();
        p->drawText(header.adjusted(12, 0, -8, 0), Qt::AlignLeft | Qt::AlignVCenter, glyph + title_);
        const QRectF toggle = toggleRect();
        if (!toggle.isEmpty()) {
            p->setPen(QPen(color_.darker(150), 1));
            p->setBrush(unfolded_ ? color_.darker(115) : QColor(255, 255, 255, 200));
            p->drawRoundedRect(toggle, 5, 5);
            p->setPen(unfolded_ ? Qt::white : QColor(0x15, 0x15, 0x20));
            p->setFont(font(8.5, true));
            p->drawText(toggle, Qt::AlignCenter, toggleText());
        }
        p->setFont(font(8.5));
        p->setPen(QColor(0x30, 0x30, 0x40));
        const double right = toggle.isEmpty() ? 12 : rect_.right() - toggle.left() + 8;
        p->drawText(header.adjusted(8, 0, -right, 0), Qt::AlignRight | Qt::AlignVCenter, info_);
        if (!expanded_ && !unfolded_) {
            // One square per op, coloured by its sharding.
            const double size = 11, gap = 3;
            double x = rect_.left() + 14;
            const double y = rect_.top() + kCardHeader + 10;
            for (const auto& c : strip_) {
                if (x + size > rect_.right() - 14) break;
                p->setPen(QPen(c.darker(140), 0.8));
                p->setBrush(c);
                p->drawRoundedRect(QRectF(x, y, size, size), 2, 2);
                x += size + gap;
            }
            paintPills(p, QPointF(rect_.right() - 12, y + size / 2), pills_, true);
        }
    }

private:
    QString toggleText() const { return (unfolded_ ? QStringLiteral("− ") : QStringLiteral("+ ")) + QStringLiteral("×%1").arg(runCount_); }

    QRectF rect_;
    QString title_, info_;
    QColor color_;
    bool expanded_, expandable_;
    std::vector<QColor> strip_;
    std::vector<Pill> pills_;
    int runCount_;
    bool unfolded_;
};

class BadgeItem : public QGraphicsItem {
public:
    BadgeItem(QPointF centre, std::vector<Pill> pills) : centre_(centre), pills_(std::move(pills)) {}
    QRectF boundingRect() const override
    {
        return QRectF(centre_.x() - width() / 2 - 2, centre_.y() - 10, width() + 4, 20);
    }
    void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override
    {
        p->setRenderHint(QPainter::Antialiasing);
        paintPills(p, QPointF(centre_.x() - width() / 2, centre_.y()), pills_);
    }

private:
    double width() const
    {
        const QFontMetricsF fm(font(7.5, true));
        double w = 0;
        for (const auto& pill : pills_) w += fm.horizontalAdvance(pill.text) + 16;
        return w - 4;
    }
    QPointF centre_;
    std::vector<Pill> pills_;
};

void addEdge(QGraphicsScene& scene, QPointF from, QPointF to, double sideOffset, const QString& tooltip)
{
    QPainterPath path(from);
    if (sideOffset == 0) {
        const double dy = (to.y() - from.y()) / 2;
        path.cubicTo(from + QPointF(0, dy), to - QPointF(0, dy), to);
    } else {
        // Skip edges (residuals) bow out to the side so they do not cross the nodes in between.
        path.cubicTo(from + QPointF(sideOffset, 30), to + QPointF(sideOffset, -30), to);
    }
    auto* item = scene.addPath(path, QPen(QColor(0x70, 0x78, 0x88), 1.3));
    item->setZValue(-1);
    item->setToolTip(tooltip);
    QPolygonF head;
    head << to << to + QPointF(-4.5, -8) << to + QPointF(4.5, -8);
    auto* arrow = scene.addPolygon(head, Qt::NoPen, QColor(0x70, 0x78, 0x88));
    arrow->setZValue(-1);
}

std::vector<Pill> pillsFor(const std::map<CollectiveKind, QStringList>& kinds)
{
    std::vector<Pill> pills;
    for (const auto& [kind, lines] : kinds) pills.push_back({collectiveAbbrev(kind), collectiveColor(kind)});
    return pills;
}

CardLayout cardLayoutFrom(const LayoutResult& result, const LayoutInput& input)
{
    CardLayout out;
    out.ok = true;
    out.width = result.width;
    out.height = result.height;
    for (const auto& n : result.nodes) out.centers.emplace_back(n.center.x, n.center.y);
    for (size_t e = 0; e < result.edges.size() && e < input.edges.size(); ++e) {
        const EdgeLayout& el = result.edges[e];
        if (el.spline.empty()) continue;
        QPainterPath path(QPointF(el.spline[0].x, el.spline[0].y));
        for (size_t k = 1; k + 2 < el.spline.size(); k += 3)
            path.cubicTo(QPointF(el.spline[k].x, el.spline[k].y), QPointF(el.spline[k + 1].x, el.spline[k + 1].y),
                         QPointF(el.spline[k + 2].x, el.spline[k + 2].y));
        if (el.hasArrow) path.lineTo(el.arrowTip.x, el.arrowTip.y);
        const int from = std::stoi(input.edges[e].from.substr(1)), to = std::stoi(input.edges[e].to.substr(1));
        out.edges[{from, to}] = path;
    }
    return out;
}

/// A dot spline, moved into the scene, with an arrow head at its end.
void addSplineEdge(QGraphicsScene& scene, QPainterPath path, QPointF offset, QPointF tailFrom)
{
    path.translate(offset);
    // Dot's node is taller than the drawn one: join the drawn node's bottom to the spline's start.
    QPainterPath full(tailFrom);
    full.lineTo(path.elementAt(0));
    full.connectPath(path);
    auto* item = scene.addPath(full, QPen(QColor(0x70, 0x78, 0x88), 1.3));
    item->setZValue(-1);
    const QPointF to = path.currentPosition();
    const QPointF before = path.pointAtPercent(std::max(0.0, 1.0 - 8.0 / std::max(8.0, path.length())));
    QLineF dir(to, before);
    dir.setLength(8);
    QLineF normal = dir.normalVector();
    normal.setLength(4.5);
    const QPointF base = dir.p2();
    const QPointF side = normal.p2() - normal.p1();
    QPolygonF head;
    head << to << base + side << base - side;
    auto* arrow = scene.addPolygon(head, Qt::NoPen, QColor(0x70, 0x78, 0x88));
    arrow->setZValue(-1);
}

} // namespace

class Minimap : public QGraphicsView {
public:
    explicit Minimap(GraphView* main) : QGraphicsView(main), main_(main)
    {
        setInteractive(false);
        setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        setRenderHint(QPainter::Antialiasing);
        setFrameShape(QFrame::Box);
        setStyleSheet(QStringLiteral("background: rgba(250, 250, 252, 230);"));
        setToolTip(QObject::tr("Overview: click or drag to move the view"));
    }
    void refit()
    {
        if (scene()) fitInView(scene()->itemsBoundingRect().adjusted(-10, -10, 10, 10), Qt::KeepAspectRatio);
        viewport()->update();
    }

protected:
    void drawForeground(QPainter* p, const QRectF&) override
    {
        const QRectF visible = main_->mapToScene(main_->viewport()->rect()).boundingRect();
        p->setPen(QPen(QColor(0x1f, 0x5f, 0xbf), 0));
        p->setBrush(QColor(0x1f, 0x5f, 0xbf, 40));
        p->drawRect(visible);
    }
    void mousePressEvent(QMouseEvent* e) override { main_->centerOn(mapToScene(e->pos())); }
    void mouseMoveEvent(QMouseEvent* e) override
    {
        if (e->buttons() & Qt::LeftButton) main_->centerOn(mapToScene(e->pos()));
    }
    void wheelEvent(QWheelEvent* e) override { e->ignore(); }

private:
    GraphView* main_;
};

GraphView::GraphView(QWidget* parent) : QGraphicsView(parent), minimap_(new Minimap(this))
{
    setScene(&scene_);
    setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    setDragMode(QGraphicsView::ScrollHandDrag);
    setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
    setBackgroundBrush(QColor(0xfb, 0xfb, 0xfd));
    setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
    minimap_->setScene(&scene_);
    minimap_->resize(170, 210);
    placeMinimap();
}

GraphView::~GraphView() = default;

void GraphView::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    fitPending_ = true;
    if (document_) {
        connect(document_, &Document::modelChanged, this, &GraphView::onModelChanged);
        connect(document_, &Document::planChanged, this, &GraphView::rebuild);
        connect(document_, &Document::expandedClassesChanged, this, &GraphView::rebuild);
        connect(document_, &Document::selectionChanged, this, &GraphView::showSelection);
    }
    rebuild();
}

void GraphView::onModelChanged()
{
    fitPending_ = true;
    // Dot's positions belong to the old fold; a job still running for it is stale.
    cardLayouts_.clear();
    layoutInFlight_.clear();
    layoutWorkspace_ = nullptr;
    ++layoutJob_;
    // A model with nothing expanded yet opens its biggest repeated block.
    if (document_ && document_->expandedClasses().isEmpty() && document_->plan()) {
        const FoldedGraph& f = document_->plan()->workspace->folded;
        int best = -1;
        double weight = -1;
        for (const auto& run : f.runs) {
            const auto& bc = f.classes[static_cast<size_t>(run.classId)];
            const double w = double(run.count) * bc.opsPerInstance();
            if (w > weight) {
                weight = w;
                best = run.classId;
            }
        }
        if (best >= 0) document_->setExpandedClasses({QString::fromStdString(f.classes[static_cast<size_t>(best)].label)});
    }
}

void GraphView::rebuild()
{
    scene_.clear();
    index_ = {};
    selectionMarker_ = nullptr;
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan) return;
    const PlanWorkspace& ws = *plan->workspace;
    const Graph& g = ws.model.graph;
    const FoldedGraph& f = ws.folded;
    const CostModel& model = *ws.costModel;
    const SearchResult& r = plan->result;
    const QStringList expanded = document_->expandedClasses();
    const auto producers = g.producers();
    std::vector<int> topoPos(g.ops.size());
    {
        const auto order = g.topologicalOrder();
        for (size_t i = 0; i < order.size(); ++i) topoPos[static_cast<size_t>(order[i])] = static_cast<int>(i);
    }

    // Which card shows each op: runs are cards; siblings show inside their parent's card.
    std::map<std::pair<int, int>, int> cardOfInstance;
    for (size_t ri = 0; ri < f.runs.size(); ++ri)
        for (int k = 0; k < f.runs[ri].count; ++k) cardOfInstance[{f.runs[ri].classId, f.runs[ri].firstInstance + k}] = static_cast<int>(ri);
    for (int pass = 0; pass < 4; ++pass) // nested siblings resolve through their parents
        for (const auto& sg : f.siblings) {
            const auto parent = cardOfInstance.find({sg.parentClass, sg.parentInstance});
            if (parent == cardOfInstance.end()) continue;
            for (int inst : sg.instances) cardOfInstance[{sg.classId, inst}] = parent->second;
        }
    std::vector<int> cardOfOp(g.ops.size(), -1);
    for (size_t op = 0; op < g.ops.size(); ++op) {
        const auto it = cardOfInstance.find({f.classOfOp[op], f.instanceOfOp[op]});
        if (it != cardOfInstance.end()) cardOfOp[op] = it->second;
    }

    // Collectives per op of the plan, by kind, with their details for the tooltip.
    std::map<OpId, std::map<CollectiveKind, QStringList>> collectivesAt;
    for (const auto& c : r.breakdown.collectives)
        collectivesAt[c.at][c.kind] << QStringLiteral("%1 %2 over %3: %4, %5")
                                           .arg(QLatin1String(phaseName(c.phase).data()), QLatin1String(collectiveName(c.kind).data()),
                                                QString::fromStdString(model.mesh().axes[static_cast<size_t>(c.axis)].name), formatBytes(c.bytes),
                                                formatSeconds(c.seconds));

    if (layoutWorkspace_ != plan->workspace.get()) {
        cardLayouts_.clear();
        layoutInFlight_.clear();
        layoutWorkspace_ = plan->workspace.get();
    }
    std::map<int, LayoutInput> layoutsToRequest; // expanded cards dot has not laid out yet

    // One instance's ops as the nodes of a card: its ops, plus one node per sibling group whose
    // parent it is; edges between them; a layered layout (rank = longest path from the inputs).
    struct Node {
        OpId op = -1;
        int group = -1;
        int rank = 0;
        double order = 0;
        QPointF pos;
    };
    struct InstanceNodes {
        std::vector<Node> nodes;
        std::map<OpId, int> nodeOfOp;
        std::set<std::pair<int, int>> edges;
        int ranks = 0;
        size_t widest = 1;
    };
    auto instanceNodes = [&](int classId, int instance) {
        InstanceNodes in;
        std::vector<Node>& nodes = in.nodes;
        const BlockInstance& inst = f.classes[static_cast<size_t>(classId)].instances[static_cast<size_t>(instance)];
        for (OpId op : inst.ops) {
            in.nodeOfOp[op] = static_cast<int>(nodes.size());
            nodes.push_back({op, -1, 0, double(topoPos[static_cast<size_t>(op)]), {}});
        }
        for (size_t gi = 0; gi < f.siblings.size(); ++gi) {
            const auto& sg = f.siblings[gi];
            if (sg.parentClass != classId || sg.parentInstance != instance) continue;
            const int node = static_cast<int>(nodes.size());
            int first = static_cast<int>(g.ops.size());
            for (int si : sg.instances)
                for (OpId op : f.classes[static_cast<size_t>(sg.classId)].instances[static_cast<size_t>(si)].ops) {
                    in.nodeOfOp[op] = node;
                    first = std::min(first, topoPos[static_cast<size_t>(op)]);
                }
            nodes.push_back({-1, static_cast<int>(gi), 0, double(first), {}});
        }
        std::vector<std::vector<int>> preds(nodes.size());
        std::vector<int> byTopo(nodes.size());
        for (size_t i = 0; i < nodes.size(); ++i) byTopo[i] = static_cast<int>(i);
        std::sort(byTopo.begin(), byTopo.end(), [&](int a, int b) { return nodes[static_cast<size_t>(a)].order < nodes[static_cast<size_t>(b)].order; });
        for (const auto& [op, node] : in.nodeOfOp)
            for (TensorId t : g.op(op).inputs) {
                const OpId p = producers[static_cast<size_t>(t)];
                const auto from = in.nodeOfOp.find(p);
                if (p < 0 || from == in.nodeOfOp.end() || from->second == node) continue;
                if (in.edges.insert({from->second, node}).second) preds[static_cast<size_t>(node)].push_back(from->second);
            }
        for (int n : byTopo) {
            int rank = 0;
            for (int p : preds[static_cast<size_t>(n)]) rank = std::max(rank, nodes[static_cast<size_t>(p)].rank + 1);
            nodes[static_cast<size_t>(n)].rank = rank;
            in.ranks = std::max(in.ranks, rank + 1);
        }
        std::vector<std::vector<int>> rows(static_cast<size_t>(in.ranks));
        for (int n : byTopo) rows[static_cast<size_t>(nodes[static_cast<size_t>(n)].rank)].push_back(n);
        for (auto& row : rows) {
            // Order by the mean position of the predecessors (barycentre), then topologically.
            for (int n : row) {
                const auto& ps = preds[static_cast<size_t>(n)];
                if (ps.empty()) continue;
                double sum = 0;
                for (int p : ps) sum += nodes[static_cast<size_t>(p)].pos.x();
                nodes[static_cast<size_t>(n)].pos.setX(sum / ps.size());
            }
            std::stable_sort(row.begin(), row.end(), [&](int a, int b) {
                return nodes[static_cast<size_t>(a)].pos.x() < nodes[static_cast<size_t>(b)].pos.x();
            });
            for (size_t i = 0; i < row.size(); ++i)
                nodes[static_cast<size_t>(row[i])].pos.setX((double(i) - (double(row.size()) - 1) / 2) * (kNodeW + kGapX));
            in.widest = std::max(in.widest, row.size());
        }
        return in;
    };

    // What a collapsed card shows of an instance: its time, collectives and sharding strip.
    struct InstanceSummary {
        double seconds = 0;
        std::map<CollectiveKind, QStringList> kinds;
        std::vector<QColor> strip;
    };
    auto instanceSummary = [&](const BlockInstance& inst) {
        InstanceSummary sum;
        for (OpId op : inst.ops) {
            const auto& ob = r.breakdown.ops[static_cast<size_t>(op)];
            sum.seconds += ob.computeSeconds + ob.commSeconds;
            sum.strip.push_back(shardingColor(classifyStrategy(model, op, r.strategyOfOp[static_cast<size_t>(op)])));
            if (const auto it = collectivesAt.find(op); it != collectivesAt.end())
                for (const auto& [kind, lines] : it->second) sum.kinds[kind] << lines;
        }
        return sum;
    };

    // The ops of one instance inside an expanded card whose body starts at `top`.
    auto drawOps = [&](InstanceNodes& in, double top, const CardLayout* dot, QPointF dotOrigin) {
        std::vector<Node>& nodes = in.nodes;
        for (auto& n : nodes) n.pos.setY(top + n.rank * (kNodeH + kGapY));
        if (dot)
            for (size_t i = 0; i < nodes.size(); ++i) // n.pos is a node's top centre; dot gives centres
                nodes[i].pos = dotOrigin + dot->centers[i] - QPointF(0, kDotNodeH / 2);
        for (auto& n : nodes) {
            const QRectF rect(n.pos.x() - kNodeW / 2, n.pos.y(), kNodeW, kNodeH);
            QGraphicsItem* item = nullptr;
            if (n.op >= 0) {
                const int s = r.strategyOfOp[static_cast<size_t>(n.op)];
                const ShardingClass sc = classifyStrategy(model, n.op, s);
                const QString strategy = QString::fromStdString(strategyToString(model.strategies(n.op)[static_cast<size_t>(s)],
                                                                                 model.signature(n.op), model.mesh()));
                const QString spec = g.op(n.op).outputs.empty()
                                         ? QString()
                                         : QString::fromStdString(specToString(model.outputSpec(n.op, s, 0), model.mesh()));
                item = new OpNodeItem(rect, shortOpName(g.op(n.op).name), strategy + QStringLiteral("  →  ") + spec, shardingColor(sc),
                                      r.lockedOp[static_cast<size_t>(n.op)]);
                item->setData(KindKey, OpKindItem);
                item->setData(ValueKey, n.op);
                item->setToolTip(tr("%1\n%2 · %3 · %4\nstrategy %5, output %6")
                                     .arg(QString::fromStdString(g.op(n.op).name), QLatin1String(opKindName(g.op(n.op).kind).data()),
                                          QString::fromStdString(model.signature(n.op).equation), shardingClassName(sc), strategy, spec));
                index_.opItems[n.op] = item;
                if (dot) index_.dotPlacedOps.insert(n.op);
            } else {
                const auto& sg = f.siblings[static_cast<size_t>(n.group)];
                const auto& sc = f.classes[static_cast<size_t>(sg.classId)];
                item = new OpNodeItem(rect, QStringLiteral("%1  ×%2").arg(QString::fromStdString(sc.label)).arg(sg.instances.size()),
                                      countOf(static_cast<int>(sg.instances.size()), "parallel branch", "parallel branches"), classColor(sg.classId), false);
                item->setToolTip(tr("Parallel identical branches (e.g. experts), %1 ops each").arg(sc.opsPerInstance()));
            }
            scene_.addItem(item);
        }
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
            if (span > 1 && std::abs(na.pos.x() - nb.pos.x()) < 1) side = (na.pos.x() >= 0 ? 1 : -1) * (kNodeW * 0.75 + 10 * span);
            addEdge(scene_, na.pos + QPointF(0, kNodeH), nb.pos, side, QString());
        }
        // Collective badges on the edges leaving the op after which they happen.
        for (const auto& n : nodes) {
            if (n.op < 0) continue;
            const auto it = collectivesAt.find(n.op);
            if (it == collectivesAt.end()) continue;
            auto* badge = new BadgeItem(n.pos + QPointF(0, kNodeH + kGapY * 0.42), pillsFor(it->second));
            QStringList lines;
            for (const auto& [kind, ls] : it->second) lines << ls;
            badge->setToolTip(tr("After %1:\n%2").arg(QString::fromStdString(g.op(n.op).name), lines.join(QLatin1Char('\n'))));
            badge->setZValue(2);
            scene_.addItem(badge);
            ++index_.badges;
        }
    };

    double y = 0;
    std::vector<QRectF> cardRects;
    for (size_t ri = 0; ri < f.runs.size(); ++ri) {
        const Run& run = f.runs[ri];
        const BlockClass& bc = f.classes[static_cast<size_t>(run.classId)];
        const BlockInstance& inst = bc.instances[static_cast<size_t>(run.firstInstance)];
        const QString label = QString::fromStdString(bc.label);
        const bool isExpanded = expanded.contains(label);
        // A run of several instances shows them one card each when its instances are unfolded.
        const bool unfolded = run.count > 1 && expanded.contains(instancesKey(label));
        // Under a memory limit the search may mix two layouts across the run's instances: say
        // how many differ from the first, which the folded card shows.
        int differing = 0;
        for (int a = 1; a < run.count; ++a) {
            const BlockInstance& other = bc.instances[static_cast<size_t>(run.firstInstance + a)];
            for (size_t k = 0; k < other.ops.size(); ++k) {
                const auto o = static_cast<size_t>(other.ops[k]), first = static_cast<size_t>(bc.instances[static_cast<size_t>(run.firstInstance)].ops[k]);
                if (r.strategyOfOp[o] != r.strategyOfOp[first] || r.recomputeOfOp[o] != r.recomputeOfOp[first]) {
                    ++differing;
                    break;
                }
            }
        }
        QString title = run.count > 1 ? QStringLiteral("%1   ×%2").arg(label).arg(run.count) : label;
        if (differing > 0) title += tr("   (%1 with another layout)").arg(differing);

        // The card shows the run's first instance (every instance has the same ops).
        InstanceNodes rep = instanceNodes(run.classId, run.firstInstance);
        const InstanceSummary repSummary = instanceSummary(inst);
        const QString info = countOf(bc.opsPerInstance(), "op", "ops") + QStringLiteral(" · ") + formatSeconds(repSummary.seconds) +
                             (run.count > 1 ? tr(" each") : QString());

        // Dot's layout of this card when it has one; else the layered one, and ask dot.
        const auto dotIt = cardLayouts_.find(static_cast<int>(ri));
        const CardLayout* dot = isExpanded && dotIt != cardLayouts_.end() && dotIt->second.ok &&
                                        dotIt->second.centers.size() == rep.nodes.size()
                                    ? &dotIt->second
                                    : nullptr;
        if (isExpanded && dotIt == cardLayouts_.end()) {
            LayoutInput in;
            for (size_t i = 0; i < rep.nodes.size(); ++i) {
                LayoutNode ln;
                ln.id = "n" + std::to_string(i);
                ln.label = " "; // sized by width/height; the scene draws the text
                ln.width = kNodeW;
                ln.height = kDotNodeH;
                in.nodes.push_back(std::move(ln));
            }
            for (const auto& [a, b] : rep.edges) in.edges.push_back({"n" + std::to_string(a), "n" + std::to_string(b), {}});
            layoutsToRequest.emplace(static_cast<int>(ri), std::move(in));
        }
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
        const QRectF cardRect(-outerWidth / 2, y, outerWidth, outerHeight);
        auto* card = new CardItem(cardRect, title, unfolded ? countOf(run.count, "instance", "instances") + QStringLiteral(" · ") + info : info,
                                  classColor(run.classId), isExpanded, true, unfolded ? std::vector<QColor>() : repSummary.strip,
                                  unfolded ? std::vector<Pill>() : pillsFor(repSummary.kinds), run.count > 1 ? run.count : 0, unfolded);
        card->setData(KindKey, CardKindItem);
        card->setData(ValueKey, static_cast<int>(index_.cards.size()));
        card->setToolTip(run.count > 1 ? tr("%1: double-click to %2 its ops; click %3 to %4 its %5 instances")
                                             .arg(title, isExpanded ? tr("hide") : tr("show"), unfolded ? QStringLiteral("−") : QStringLiteral("+"),
                                                  unfolded ? tr("fold") : tr("show"))
                                             .arg(run.count)
                                       : tr("%1: double-click to %2").arg(title, isExpanded ? tr("collapse") : tr("expand")));
        scene_.addItem(card);
        const int cardIndex = static_cast<int>(index_.cards.size());
        index_.cards.push_back(card);
        index_.cardLabels.push_back(title);
        index_.cardClass.push_back(run.classId);
        index_.cardRun.push_back(static_cast<int>(ri));
        index_.cardToggles.push_back(card->toggleRect());
        cardRects.push_back(cardRect);

        if (!unfolded) {
            if (isExpanded) drawOps(rep, y + kCardHeader + kCardPad, dot, QPointF(-(dot ? dot->width : 0) / 2, y + kCardHeader + kCardPad));
            else index_.badges += static_cast<int>(repSummary.kinds.size());
        } else {
            // One card per instance, stacked in the run's frame, chained by arrows.
            double top = y + kCardHeader + kInstancePad;
            for (int k = 0; k < run.count; ++k) {
                const int instance = run.firstInstance + k;
                const BlockInstance& ik = bc.instances[static_cast<size_t>(instance)];
                const InstanceSummary sum = k == 0 ? repSummary : instanceSummary(ik);
                const QRectF rect(-width / 2, top, width, height);
                const QString name = instanceLabel(g, ik);
                auto* sub = new CardItem(rect, name.isEmpty() ? tr("instance %1").arg(instance) : name,
                                         countOf(bc.opsPerInstance(), "op", "ops") + QStringLiteral(" · ") + formatSeconds(sum.seconds),
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
                index_.instanceCardRun.push_back(static_cast<int>(ri));
                index_.instanceCardOf[{run.classId, instance}] = sub;
                if (isExpanded) {
                    InstanceNodes nodes = k == 0 ? rep : instanceNodes(run.classId, instance);
                    const CardLayout* own = dot && dot->centers.size() == nodes.nodes.size() ? dot : nullptr;
                    drawOps(nodes, top + kCardHeader + kCardPad, own, QPointF(-(own ? own->width : 0) / 2, top + kCardHeader + kCardPad));
                } else {
                    index_.badges += static_cast<int>(sum.kinds.size());
                }
                if (k > 0) addEdge(scene_, QPointF(0, top - kInstanceGap), QPointF(0, top), 0, QString());
                top += height + kInstanceGap;
            }
        }
        y += outerHeight + kCardGap;
    }

    // Edges between cards: a tensor produced in one card and read in another.
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
    // Ask dot for the cards it has not laid out, unless the newest job already does.
    bool covered = !layoutsToRequest.empty();
    for (const auto& [run, input] : layoutsToRequest) covered = covered && layoutInFlight_.count(run);
    if (!layoutsToRequest.empty() && !covered) startLayout(std::move(layoutsToRequest));
    scene_.setSceneRect(scene_.itemsBoundingRect().adjusted(-40, -30, 40, 30));
    minimap_->refit();
    showSelection();
    // Fit once the view has its real size (it may still be hidden behind the start page).
    if (fitPending_ && isVisible()) {
        fitPending_ = false;
        fitWidth();
    }
    emit sceneRebuilt();
}

quint64 GraphView::relayout()
{
    cardLayouts_.clear();
    layoutInFlight_.clear();
    rebuild(); // requests every expanded card again
    return layoutJob_;
}

quint64 GraphView::startLayout(std::map<int, LayoutInput> inputs)
{
    using Results = std::map<int, CardLayout>;
    const quint64 job = ++layoutJob_;
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan) return job;
    const auto workspace = plan->workspace; // kept alive, and compared when the result arrives
    layoutInFlight_.clear();
    for (const auto& [run, input] : inputs) layoutInFlight_.insert(run);
    auto* watcher = new QFutureWatcher<Results>(this);
    connect(watcher, &QFutureWatcher<Results>::finished, this, [this, watcher, job, workspace] {
        watcher->deleteLater();
        const auto current = document_ ? document_->plan() : nullptr;
        if (job != layoutJob_ || !current || current->workspace != workspace) {
            emit layoutDropped(job);
            return;
        }
        for (auto& [run, layout] : watcher->result()) cardLayouts_[run] = std::move(layout);
        layoutInFlight_.clear();
        rebuild();
        emit layoutFinished(job);
    });
    // core/layout serialises Graphviz under its own mutex, so this is safe off the GUI thread.
    watcher->setFuture(QtConcurrent::run([inputs = std::move(inputs)] {
        Results results;
        for (const auto& [run, input] : inputs) {
            try {
                results[run] = cardLayoutFrom(layoutGraph(input), input);
            } catch (const std::exception&) {
                results[run] = CardLayout{}; // not ok: the layered layout stays, and dot is not asked again
            }
        }
        return results;
    }));
    return job;
}

void GraphView::showSelection()
{
    if (selectionMarker_) {
        scene_.removeItem(selectionMarker_);
        delete selectionMarker_;
        selectionMarker_ = nullptr;
    }
    const auto plan = document_ ? document_->plan() : nullptr;
    const OpId op = document_ ? document_->selectedOp() : -1;
    if (!plan || op < 0 || static_cast<size_t>(op) >= plan->workspace->folded.classOfOp.size()) return;
    // An op of another instance is shown at its position in the displayed representative.
    const FoldedGraph& f = plan->workspace->folded;
    const int cls = f.classOfOp[static_cast<size_t>(op)];
    const auto& instOps = f.classes[static_cast<size_t>(cls)].instances[static_cast<size_t>(f.instanceOfOp[static_cast<size_t>(op)])].ops;
    const size_t position = static_cast<size_t>(std::find(instOps.begin(), instOps.end(), op) - instOps.begin());
    QGraphicsItem* target = nullptr;
    // The op itself when it is drawn (an unfolded run draws every instance), else its instance's card.
    if (const auto it = index_.opItems.find(op); it != index_.opItems.end()) target = it->second;
    else if (const auto card = index_.instanceCardOf.find({cls, f.instanceOfOp[static_cast<size_t>(op)]}); card != index_.instanceCardOf.end())
        target = card->second;
    for (size_t c = 0; c < index_.cards.size() && !target; ++c) {
        if (index_.cardClass[c] != cls) continue;
        const Run& run = f.runs[static_cast<size_t>(index_.cardRun[c])];
        if (f.instanceOfOp[static_cast<size_t>(op)] < run.firstInstance || f.instanceOfOp[static_cast<size_t>(op)] >= run.firstInstance + run.count) continue;
        const OpId shown = f.classes[static_cast<size_t>(cls)].instances[static_cast<size_t>(run.firstInstance)].ops[position];
        const auto it = index_.opItems.find(shown);
        target = it != index_.opItems.end() ? it->second : index_.cards[c];
    }
    if (!target) return;
    auto* marker = scene_.addPath([&] {
        QPainterPath p;
        p.addRoundedRect(target->boundingRect().adjusted(-3, -3, 3, 3), 8, 8);
        return p;
    }(), QPen(QColor(0x10, 0x50, 0xd0), 3), Qt::NoBrush);
    marker->setZValue(5);
    selectionMarker_ = marker;
    ensureVisible(target, 60, 60);
}

QString GraphView::instancesKey(const QString& classLabel) { return instancesViewKey(classLabel); }

bool GraphView::instancesShown(int card) const
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan || card < 0 || card >= static_cast<int>(index_.cards.size())) return false;
    const QString label = QString::fromStdString(plan->workspace->folded.classes[static_cast<size_t>(index_.cardClass[static_cast<size_t>(card)])].label);
    return document_->expandedClasses().contains(instancesKey(label));
}

void GraphView::setInstancesShown(int card, bool shown)
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan || card < 0 || card >= static_cast<int>(index_.cards.size()) || shown == instancesShown(card)) return;
    const QString key = instancesKey(QString::fromStdString(plan->workspace->folded.classes[static_cast<size_t>(index_.cardClass[static_cast<size_t>(card)])].label));
    QStringList expanded = document_->expandedClasses();
    if (shown) expanded << key;
    else expanded.removeAll(key);
    document_->setExpandedClasses(expanded);
}

void GraphView::toggleCard(int card)
{
    if (!document_ || card < 0 || card >= static_cast<int>(index_.cards.size())) return;
    const auto plan = document_->plan();
    const QString label = QString::fromStdString(plan->workspace->folded.classes[static_cast<size_t>(index_.cardClass[static_cast<size_t>(card)])].label);
    QStringList expanded = document_->expandedClasses();
    if (expanded.contains(label)) expanded.removeAll(label);
    else expanded << label;
    document_->setExpandedClasses(expanded);
}

bool GraphView::findNext(const QString& text)
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan || text.isEmpty()) return false;
    const Graph& g = plan->workspace->model.graph;
    const int n = static_cast<int>(g.ops.size());
    const int start = document_->selectedOp();
    for (int k = 1; k <= n; ++k) {
        const OpId op = (start + k + n) % n;
        if (!QString::fromStdString(g.op(op).name).contains(text, Qt::CaseInsensitive)) continue;
        // Open the card that holds it, so the op itself can be shown.
        const QString label = QString::fromStdString(plan->workspace->folded.classes[static_cast<size_t>(plan->workspace->folded.classOfOp[static_cast<size_t>(op)])].label);
        if (!document_->expandedClasses().contains(label)) document_->setExpandedClasses(document_->expandedClasses() << label);
        document_->setSelectedOp(op);
        return true;
    }
    return false;
}

void GraphView::zoomBy(double factor)
{
    const double current = transform().m11();
    const double next = std::clamp(current * factor, 0.05, 4.0);
    scale(next / current, next / current);
    minimap_->viewport()->update();
}

void GraphView::zoomIn() { zoomBy(1.25); }
void GraphView::zoomOut() { zoomBy(0.8); }

void GraphView::fitAll()
{
    fitInView(scene_.sceneRect(), Qt::KeepAspectRatio);
    minimap_->viewport()->update();
}

void GraphView::fitWidth()
{
    const QRectF rect = scene_.sceneRect();
    if (rect.isEmpty()) return;
    const double scaleX = (viewport()->width() - 24) / rect.width();
    const double s = std::clamp(scaleX, 0.3, 0.85);
    setTransform(QTransform::fromScale(s, s));
    centerOn(rect.center().x(), rect.top() + viewport()->height() / s / 2);
    minimap_->viewport()->update();
}

void GraphView::setMinimapVisible(bool visible) { minimap_->setVisible(visible); }

void GraphView::wheelEvent(QWheelEvent* event)
{
    if (event->modifiers() & Qt::ControlModifier) {
        zoomBy(std::pow(1.0015, event->angleDelta().y()));
        event->accept();
        return;
    }
    QGraphicsView::wheelEvent(event);
}

void GraphView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton && document_) {
        const QPointF scenePos = mapToScene(event->pos());
        for (QGraphicsItem* item : items(event->pos()))
            if (auto* card = qgraphicsitem_cast<CardItem*>(item);
                card && card->data(KindKey).toInt() == CardKindItem && card->toggleRect().contains(scenePos)) {
                toggleInstances(card->data(ValueKey).toInt());
                event->accept();
                return;
            }
        for (QGraphicsItem* item : items(event->pos())) {
            if (item->data(KindKey).toInt() == OpKindItem) {
                document_->setSelectedOp(item->data(ValueKey).toInt());
                break;
            }
        }
    }
    QGraphicsView::mousePressEvent(event);
}

void GraphView::mouseDoubleClickEvent(QMouseEvent* event)
{
    for (QGraphicsItem* item : items(event->pos())) {
        if (auto* card = qgraphicsitem_cast<CardItem*>(item); card && card->toggleRect().contains(mapToScene(event->pos()))) {
            event->accept(); // the second click of a double-click on the +/- toggle
            return;
        }
        if (item->data(KindKey).toInt() == CardKindItem || item->data(KindKey).toInt() == InstanceCardKindItem) {
            // Only the header toggles, so double-clicking an op inside does not fold its card.
            const QPointF scenePos = mapToScene(event->pos());
            if (scenePos.y() - item->boundingRect().top() <= kCardHeader + 8 || item->boundingRect().height() <= kCollapsedH + 20) {
                toggleCard(item->data(ValueKey).toInt());
                return;
            }
        }
    }
    QGraphicsView::mouseDoubleClickEvent(event);
}

void GraphView::resizeEvent(QResizeEvent* event)
{
    QGraphicsView::resizeEvent(event);
    placeMinimap();
    if (fitPending_ && !scene_.items().isEmpty() && isVisible()) {
        fitPending_ = false;
        fitWidth();
    }
}

void GraphView::showEvent(QShowEvent* event)
{
    QGraphicsView::showEvent(event);
    placeMinimap();
    if (fitPending_ && !scene_.items().isEmpty()) {
        fitPending_ = false;
        fitWidth();
    }
}

void GraphView::scrollContentsBy(int dx, int dy)
{
    QGraphicsView::scrollContentsBy(dx, dy);
    minimap_->viewport()->update();
}

void GraphView::placeMinimap()
{
    minimap_->move(viewport()->width() - minimap_->width() - 10, viewport()->height() - minimap_->height() - 10);
    minimap_->refit();
}

} // namespace tp
