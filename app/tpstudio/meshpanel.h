#pragma once
// Mesh & Hardware panel: preset, mesh shape (1D/2D/3D), link bandwidths, batch, sequence,
// micro-batch, mode and memory limit. Fields refuse invalid text (validators); a committed value
// becomes one undoable document edit.
#include <QPointer>
#include <QValidator>
#include <QWidget>

#include "document.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;

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

private:
    void showSettings();
    void showMesh();

    QPointer<Document> document_;
    QComboBox* hardware_;
    QLineEdit* mesh_;
    QLabel* axes_;
    QDoubleSpinBox* intra_;
    QDoubleSpinBox* inter_;
    QSpinBox* batch_;
    QSpinBox* seq_;
    QSpinBox* microBatch_;
    QComboBox* mode_;
    QLineEdit* memoryLimit_;
    bool updating_ = false;
};

} // namespace tp
