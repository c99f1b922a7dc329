#include "graphitems.h"

#include <cmath>

#include <QGraphicsPathItem>
#include <QGraphicsSceneHoverEvent>

#include "presentation.h"

namespace tp::graphview {

QColor classColor(int classId)
{
    const double hue = std::fmod(0.58 + classId * 0.381966, 1.0);
    return QColor::fromHsvF(static_cast<float>(hue), 0.45f, 0.80f);
}

QFont font(double points, bool bold)
{
    QFont f;
    f.setPointSizeF(points);
    f.setBold(bold);
    return f;
}

void paintPills(QPainter* p, QPointF at, const std::vector<Pill>& pills, bool rightAligned)
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

void StageBandItem::hoverMoveEvent(QGraphicsSceneHoverEvent* event)
{
    // One tooltip per segment: the item's tooltip follows the pointer.
    const std::vector<QRectF> rects = segmentRects();
    for (size_t i = 0; i < rects.size(); ++i)
        if (rects[i].contains(event->pos())) setToolTip(segments_[i].tooltip);
    QGraphicsItem::hoverMoveEvent(event);
}

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

} // namespace tp::graphview
