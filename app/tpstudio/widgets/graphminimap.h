#pragma once
// The graph view's overview in a corner: the whole scene, the visible part outlined; clicking
// or dragging moves the main view there.
#include <QGraphicsView>
#include <QMouseEvent>
#include <QWheelEvent>

#include "graphview.h"

namespace tp {

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

} // namespace tp
