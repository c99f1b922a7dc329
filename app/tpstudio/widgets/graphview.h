#pragma once
// The folded graph: one card per run of a block class ("layers.* ×96"), expandable to show the
// representative's ops, coloured by how each is sharded, with collective badges where the plan
// puts them. Zoom (Ctrl+wheel), pan (drag, wheel), fit, find, and a minimap.
//
// Two toggles per card, both view state kept in Document::expandedClasses (and so in the
// project file): double-clicking a card's header shows or hides its ops (the class label in the
// list); the "+ ×N" button in a run's header unfolds the run into one card per instance
// ("layers.0" ... "layers.95", each with its ops when the class is expanded), and "− ×N" folds
// them back (instancesKey(label) in the list). The outline's class rows toggle the same.
// Every instance of a run has the same ops, so dot lays out one and all of them use it.
//
// Files: graphitems (drawing the items), graphminimap (the overview), graphlayout (the layered
// and the dot layout of a card), graphscene (SceneBuilder: the scene of a plan, GraphView::
// rebuild), graphview (the view: zoom, find, selection, events).
//
// Layout: the ops inside an expanded card are placed by Graphviz dot (core/layout) on a worker
// thread (a LatestJob); a result for an older request or another workspace is dropped. Until
// dot's positions arrive (or if dot fails) a small layered layout (longest-path ranks,
// barycentre order) stands in, computed here in well under a millisecond, so the view never
// waits. Dot's positions depend only on the fold, not on the plan, so they are kept per run
// until the workspace changes.
#include <map>
#include <set>
#include <memory>

#include <QGraphicsView>
#include <QPainterPath>
#include <QPointer>

#include "document.h"
#include "latestjob.h"

namespace tp {

class Minimap;
struct LayoutInput;

/// Where things are in the scene (for tests and for selection).
struct SceneIndex {
    std::map<OpId, QGraphicsItem*>
        opItems; ///< displayed ops (the first instance of each expanded run, every instance of an unfolded one)
    std::vector<QGraphicsItem*> cards;         ///< per run
    std::vector<QString> cardLabels;           ///< per run: "layers.*  ×96"
    std::vector<QString> cardInfos;            ///< per run: its info line, "21 ops · 1.277 s each · stage 8 of 8: ..."
    std::vector<int> cardClass;                ///< per run: block class id
    std::vector<int> cardRun;                  ///< per card: index into folded.runs (-1 for a sibling group)
    std::vector<QRectF> cardToggles;           ///< per card: its "+/- ×N" toggle in the scene (empty: not a run)
    std::vector<QGraphicsItem*> instanceCards; ///< per instance card of the unfolded runs, in order
    std::vector<QString> instanceLabels;       ///< per instance card: "layers.17"
    std::vector<int> instanceCardRun;          ///< per instance card: index into folded.runs
    std::map<std::pair<int, int>, QGraphicsItem*> instanceCardOf; ///< (class, instance) -> its card
    std::vector<QString> stageBand; ///< a pipelined plan's band over the split run: "3 · 12" per stage, " *" on the shown one
    std::vector<QRectF> stageSegments; ///< per stage: its segment of the band in the scene (a click shows that stage)
    int badges = 0;                                               ///< collective badges drawn
    std::set<OpId> dotPlacedOps;                                  ///< displayed ops whose position came from Graphviz
};

/// Dot's layout of one expanded card: node centres and edge splines in the card's own frame.
struct CardLayout {
    bool ok = false; ///< false: dot failed, the layered layout stays
    double width = 0, height = 0;
    std::vector<QPointF> centers;                      ///< per card node
    std::map<std::pair<int, int>, QPainterPath> edges; ///< per (from node, to node)
};

class GraphView : public QGraphicsView {
    Q_OBJECT
public:
    explicit GraphView(QWidget* parent = nullptr);
    ~GraphView() override;
    void setDocument(Document* document);
    const SceneIndex& sceneIndex() const { return index_; }

    /// The Document::expandedClasses entry that unfolds the runs of a class into their instances.
    static QString instancesKey(const QString& classLabel);
    /// Unfolds (or folds back) the run of this card into one card per instance; one view-state
    /// change on the document, which rebuilds the scene.
    void setInstancesShown(int card, bool shown);
    bool instancesShown(int card) const;
    void toggleInstances(int card) { setInstancesShown(card, !instancesShown(card)); }
    /// Shows or hides the ops of this card's class (what double-clicking the header does).
    void toggleCard(int card);

    void zoomIn();
    void zoomOut();
    void fitAll();
    /// The opening zoom: the whole width, readable (never above 100 %), from the top.
    void fitWidth();
    /// Selects the next op (after the selected one) whose name contains the text; false if none.
    bool findNext(const QString& text);
    void setMinimapVisible(bool visible);
    /// Marks the named ops as differing from a compared plan (ExplainPanel::differencesToMark);
    /// kept across rebuilds until replaced. markedOpCount: the marks drawn.
    void setMarkedOps(const std::vector<std::string>& ops);
    int markedOpCount() const;
    /// Forgets dot's positions and lays every expanded card out again; returns the job id.
    quint64 relayout();
    quint64 latestLayoutJob() const { return layoutJobs_.latestJob(); }
    /// A dot job for the cards on screen is running.
    bool isLayingOut() const { return !layoutInFlight_.empty(); }

signals:
    void sceneRebuilt();
    /// Dot's positions of this job are on screen.
    void layoutFinished(quint64 jobId);
    /// This job's result arrived after a newer request (or for another workspace) and was dropped.
    void layoutDropped(quint64 jobId);

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
    void showDifferences();
    void placeMinimap();
    void zoomBy(double factor);
    /// Starts a dot job for these runs' cards (the inputs are built on the GUI thread; cheap).
    quint64 startLayout(std::map<int, LayoutInput> inputs);
    /// Dot's positions for some runs' cards, with the workspace they were computed for.
    struct LaidOutCards {
        std::shared_ptr<const PlanWorkspace> workspace;
        std::map<int, CardLayout> layouts;
    };
    void applyLayout(quint64 job, LaidOutCards cards);

    QPointer<Document> document_;
    QGraphicsScene scene_;
    SceneIndex index_;
    Minimap* minimap_;
    QGraphicsItem* selectionMarker_ = nullptr;
    std::vector<std::string> markedOps_;
    std::vector<QGraphicsItem*> differenceMarkers_;
    bool fitPending_ = true;
    std::map<int, CardLayout> cardLayouts_; ///< per run index, for layoutWorkspace_
    const void* layoutWorkspace_ = nullptr; ///< the workspace cardLayouts_ belong to
    std::set<int> layoutInFlight_;          ///< runs the newest job lays out
    LatestJob<LaidOutCards> layoutJobs_;    ///< the newest layout request wins
};

} // namespace tp
