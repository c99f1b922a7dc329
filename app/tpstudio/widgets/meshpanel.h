#pragma once
// Mesh & Hardware panel: preset, mesh shape (1D/2D/3D), link bandwidths, batch, sequence,
// micro-batch, mode, memory limit, comm/compute overlap and the model overrides (tpplan --set).
// Fields refuse invalid text (validators); a committed value becomes one undoable document edit.
//
// Model overrides: one row per key of the model's config (layers, hidden, heads, ...), the value
// editable. A value is refused at the field, with the reason under the table, when it is not of
// the key's type (a positive integer for sizes) or when the builder refuses the changed config
// (hidden not divisible by heads, ...): that check builds the model on a worker thread, so the
// panel never waits; only an accepted value becomes an edit. An empty value (or the model's own)
// removes the override.
#include <QPointer>
#include <QValidator>
#include <QWidget>

#include "document.h"
#include "latestjob.h"

class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTableWidget;
class QTableWidgetItem;

namespace tp {

/// "8", "2x8", "4x4x8": up to three positive axis sizes, at most 65536 devices.
class MeshShapeValidator : public QValidator {
public:
    using QValidator::QValidator;
    State validate(QString& input, int& pos) const override;
};

/// "" (the hardware's capacity), "none", or a byte quantity such as "80GiB" or "75e9".
class ByteQuantityValidator : public QValidator {
public:
    using QValidator::QValidator;
    State validate(QString& input, int& pos) const override;
};

class MeshPanel : public QWidget {
    Q_OBJECT
public:
    explicit MeshPanel(QWidget* parent = nullptr);
    void setDocument(Document* document);
    QLineEdit* meshField() { return mesh_; }
    QLineEdit* memoryLimitField() { return memoryLimit_; }
    QSpinBox* overlapField() { return overlap_; }
    /// Model overrides: column 0 the key, column 1 the (editable) value.
    QTableWidget* overridesTable() { return overrides_; }
    /// The row of a config key in the overrides table, or -1.
    int overrideRow(const QString& key) const;
    /// The reason the last override was refused ("" after an accepted one).
    QString overrideMessage() const;

    /// What a config value may be typed as: "int" (positive), "number", "bool", "list", "text".
    static QString valueKind(const nlohmann::json& value);
    /// Whether `text` is a complete value of that kind; otherwise `reason` says why not.
    static bool checkValue(const QString& kind, const QString& text, QString* reason);

signals:
    /// An override edit was refused at the field (the document is unchanged).
    void overrideRefused(const QString& key, const QString& message);
    /// An override edit passed the checks and was pushed onto the undo stack.
    void overrideAccepted(const QString& key, const QString& value);

private:
    void showSettings();
    void showMesh();
    void showPipelineChoices(const PlanSettings& settings);
    void showStages();
    void showOverrides();
    void commitOverride(QTableWidgetItem* item);
    void refuseOverride(const QString& key, const QString& message);

    QPointer<Document> document_;
    QComboBox* hardware_;
    QLineEdit* mesh_;
    QLabel* axes_;
    QDoubleSpinBox* intra_;
    QDoubleSpinBox* inter_;
    QSpinBox* batch_;
    QSpinBox* seq_;
    QSpinBox* microBatch_;
    QComboBox* zero_;
    QComboBox* pipeline_; ///< none, auto, and the divisors of the mesh's outermost axis
    QComboBox* schedule_;
    QComboBox* stageLayers_;
    QLabel* choice_; ///< what the planner chose for the auto settings
    QLabel* stages_; ///< a pipelined plan's stages: layers, step and a memory bar each
    QFormLayout* form_;
    QComboBox* mode_;
    QLineEdit* memoryLimit_;
    QSpinBox* overlap_;
    QTableWidget* overrides_;
    QLabel* overrideMessage_;
    QString overridesShown_; ///< what the table shows (model, config, overrides): rebuilt when it changes
    /// A model override checked by building the model on a worker: the value and the settings
    /// it was typed against travel with the job.
    struct OverrideCheck {
        QString key, text;
        PlanSettings before, next;
        QString error; ///< empty: the model builds
    };
    void finishOverrideCheck(const OverrideCheck& check);
    LatestJob<OverrideCheck> overrideCheck_; ///< the newest check wins
    bool updating_ = false;
};

} // namespace tp
