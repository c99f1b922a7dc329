#pragma once
// The Devices dock, for teaching: the mesh as a grid of devices (a 3D mesh as grids side by
// side), axis names and links on its edges, and for the selected op what every device holds,
// step by step (core/explain/devices.h): the collectives that bring its inputs into place, its
// compute with every operand as coloured tiles, the collectives after it, then the backward.
// A collective plays as data moving between the devices of each group along its axis.
// Space plays or pauses, ←/→ step, Home/End the first and last step, +/− the speed.
#include <QPointer>
#include <QWidget>

#include <memory>
#include <vector>

#include "document.h"
#include "explain/devices.h"
#include "latestjob.h"

class QComboBox;
class QLabel;
class QTimer;
class QToolButton;

namespace tp {

class DevicesCanvas;

class DevicesView : public QWidget {
    Q_OBJECT
public:
    explicit DevicesView(QWidget* parent = nullptr);
    ~DevicesView() override;
    void setDocument(Document* document);

    /// The selected op's steps (empty before a selection), and the one shown.
    const std::vector<explain::DeviceStep>& steps() const { return steps_; }
    int currentStep() const { return current_; }
    void setCurrentStep(int step);
    bool isPlaying() const;
    void setPlaying(bool on);
    /// How far the shown collective has played, 0 to 1 (1 when paused after a step).
    double progress() const;
    QWidget* canvas() const;

    /// Whether the shown steps wait for the view to be shown (a hidden dock computes nothing).
    bool isStale() const { return stale_; }

signals:
    void stepsShown(); ///< the steps of a newly selected op (or plan) are on screen

protected:
    void keyPressEvent(QKeyEvent* event) override;
    void showEvent(QShowEvent* event) override;

private:
    struct Computed {
        std::vector<explain::DeviceStep> steps;
        std::shared_ptr<const PlanOutcome> plan;
    };
    void request();
    void showSteps(const Computed& c);
    void updateControls();
    void tick();

    QPointer<Document> document_;
    std::shared_ptr<const PlanOutcome> plan_;
    std::vector<explain::DeviceStep> steps_;
    int current_ = 0;
    bool stale_ = false; ///< the document changed while the view was hidden
    DevicesCanvas* canvas_;
    QLabel* title_;
    QLabel* why_;
    QLabel* counter_;
    QToolButton* play_;
    QComboBox* speed_;
    QTimer* timer_;
    LatestJob<Computed> job_;
};

} // namespace tp
