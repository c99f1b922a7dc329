#pragma once
// The folded graph: one card per run of a block class ("layers.* ×96"), expandable to show the
// representative's ops, coloured by how each is sharded, with collective badges where the plan
// puts them. Zoom (Ctrl+wheel), pan (drag, wheel), fit, find, and a minimap.
//
// Layout: core/layout (Graphviz) is not there yet, so the cards are laid out here with a small
// layered layout (longest-path ranks, barycentre order). A folded graph is tens of nodes, so this
// runs on the GUI thread in well under a millisecond.
#include <map>
#include <memory>

#include <QGraphicsView>
#include <QPointer>

#include "document.h"

namespace tp {

class Minimap;

/// Where things are in the scene (for tests and for selection).
struct SceneIndex {
    std::map<OpId, QGraphicsItem*> opItems; ///< displayed ops (the first instance of each expanded run)
    std::vector<QGraphicsItem*> cards;      ///< per run
    std::vector<QString> cardLabels;        ///< per run: "layers.*  ×96"
    std::vector<int> cardClass;             ///< per run: block class id
    std::vector<int> cardRun;               ///< per card: index into folded.runs (-1 for a sibling group)
    int badges = 0;                         ///< collective badges drawn
};

class GraphView : public QGraphicsView {
    Q_OBJECT
public:
    explicit GraphView(QWidget* parent = nullptr);
    ~GraphView() override;
    void setDocument(Document* document);
    const SceneIndex& sceneIndex() const { return index_; }

    void zoomIn();
    void zoomOut();
    void fitAll();
    /// The opening zoom: the whole width, readable (never above 100 %), from the top.
    void fitWidth();
    /// Selects the next op (after the selected one) whose name contains the text; false if none.
    bool findNext(const QString& text);
    void setMinimapVisible(bool visible);

signals:
    void sceneRebuilt();

protected:
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void showEvent(QShowEvent* event) override;
    void scrollContentsBy(int dx, int dy) override;

private:
    void rebuild();
    void onModelChanged();
    void showSelection();
    void toggleCard(int card);
    void placeMinimap();
    void zoomBy(double factor);

    QPointer<Document> document_;
    QGraphicsScene scene_;
    SceneIndex index_;
    Minimap* minimap_;
    QGraphicsItem* selectionMarker_ = nullptr;
    bool fitPending_ = true;
};

} // namespace tp
