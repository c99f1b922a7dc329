#pragma once
// The graph view's scene items (op nodes, block cards, collective badges) and the edges between
// them: drawing only, no plan logic. Shared by the scene builder (graphscene.cpp).
#include <map>
#include <vector>

#include <QColor>
#include <QFont>
#include <QFontMetricsF>
#include <QGraphicsItem>
#include <QGraphicsScene>
#include <QPainter>
#include <QPainterPath>
#include <QStringList>

#include "cost/collectives.h"

namespace tp::graphview {

constexpr double kNodeW = 200, kNodeH = 40, kGapX = 22, kGapY = 36;
// Dot's nodes are taller than drawn ones: the extra room below a node holds its collective badges.
constexpr double kDotNodeH = kNodeH + 18;
constexpr double kCardPad = 18, kCardHeader = 34, kCollapsedH = 74, kCardGap = 46, kMinCardW = 360;
// An unfolded run: its instances' cards inside the run's frame.
constexpr double kInstancePad = 14, kInstanceGap = 22;

enum ItemData { KindKey = 0, ValueKey = 1 };
enum ItemKind { OpKindItem = 1, CardKindItem = 2, InstanceCardKindItem = 3 };

/// A block class's colour: hues spread by the golden angle so neighbouring classes differ.
QColor classColor(int classId);
QFont font(double points, bool bold = false);

struct Pill {
    QString text;
    QColor color;
};

void paintPills(QPainter* p, QPointF at, const std::vector<Pill>& pills, bool rightAligned = false);
/// One pill per collective kind.
std::vector<Pill> pillsFor(const std::map<CollectiveKind, QStringList>& kinds);

class OpNodeItem : public QGraphicsItem {
public:
    OpNodeItem(QRectF rect, QString name, QString detail, QColor color, bool locked) :
        rect_(rect),
        name_(std::move(name)),
        detail_(std::move(detail)),
        color_(color),
        locked_(locked)
    {}
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
             std::vector<Pill> pills, int runCount, bool unfolded) :
        rect_(rect),
        title_(std::move(title)),
        info_(std::move(info)),
        color_(color),
        expanded_(expanded),
        expandable_(expandable),
        strip_(std::move(strip)),
        pills_(std::move(pills)),
        runCount_(runCount),
        unfolded_(unfolded)
    {}
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
        // The info line right-aligned after the title, elided where it would run into it (the
        // card's tooltip has it whole).
        const double titleEnd = 12 + QFontMetricsF(font(11, true)).horizontalAdvance(glyph + title_) + 16;
        const QRectF infoRect = header.adjusted(titleEnd, 0, -right, 0);
        p->drawText(infoRect, Qt::AlignRight | Qt::AlignVCenter,
                    QFontMetricsF(font(8.5)).elidedText(info_, Qt::ElideRight, std::max(0.0, infoRect.width())));
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
    QString toggleText() const
    {
        return (unfolded_ ? QStringLiteral("− ") : QStringLiteral("+ ")) + QStringLiteral("×%1").arg(runCount_);
    }

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
    QRectF boundingRect() const override { return QRectF(centre_.x() - width() / 2 - 2, centre_.y() - 10, width() + 4, 20); }
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

/// One segment of a stage band: a pipeline stage's share of the run the stages split.
struct StageSegment {
    int layers = 0;
    QStringList labels; ///< longest first: "stage 3: 12 layers", "3 · 12", "3"; the longest that fits is drawn
    QString tooltip; ///< its layers in the whole model, step and memory
    bool shown = false; ///< the stage whose plan the card shows
};

/// Above a pipelined run's card: the whole run as its stages, each as wide as its layers, the
/// stage the card shows filled, so "×12" reads as "the 8th of 8 stages of 12".
class StageBandItem : public QGraphicsItem {
public:
    StageBandItem(QRectF rect, std::vector<StageSegment> segments, QColor color) :
        rect_(rect), segments_(std::move(segments)), color_(color)
    {
        setAcceptHoverEvents(true);
    }
    QRectF boundingRect() const override { return rect_.adjusted(-1, -1, 1, 1); }
    /// Where each segment lies (in the scene: the item is not moved).
    std::vector<QRectF> segmentRects() const
    {
        int total = 0;
        for (const auto& s : segments_) total += s.layers;
        std::vector<QRectF> rects;
        double x = rect_.left();
        for (const auto& s : segments_) {
            const double w = total > 0 ? rect_.width() * s.layers / total : 0;
            rects.emplace_back(x, rect_.top(), w, rect_.height());
            x += w;
        }
        return rects;
    }
    void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override
    {
        p->setRenderHint(QPainter::Antialiasing);
        const std::vector<QRectF> rects = segmentRects();
        const QFontMetricsF fm(font(7.5, true));
        p->setFont(font(7.5, true));
        for (size_t i = 0; i < rects.size(); ++i) {
            const StageSegment& s = segments_[i];
            const QRectF r = rects[i].adjusted(1, 0, -1, 0);
            p->setPen(QPen(color_.darker(140), s.shown ? 1.6 : 0.8));
            p->setBrush(s.shown ? color_.darker(125) : QColor(color_.red(), color_.green(), color_.blue(), 60));
            p->drawRoundedRect(r, 4, 4);
            p->setPen(s.shown ? Qt::white : QColor(0x30, 0x30, 0x40));
            for (const QString& text : s.labels)
                if (fm.horizontalAdvance(text) <= r.width() - 6) {
                    p->drawText(r, Qt::AlignCenter, text);
                    break;
                }
        }
    }

protected:
    void hoverMoveEvent(QGraphicsSceneHoverEvent* event) override;

private:
    QRectF rect_;
    std::vector<StageSegment> segments_;
    QColor color_;
};

/// A straight or side-bowed arrow from `from` to `to`.
void addEdge(QGraphicsScene& scene, QPointF from, QPointF to, double sideOffset, const QString& tooltip);
/// A dot spline, moved into the scene, with an arrow head at its end.
void addSplineEdge(QGraphicsScene& scene, QPainterPath path, QPointF offset, QPointF tailFrom);

} // namespace tp::graphview
