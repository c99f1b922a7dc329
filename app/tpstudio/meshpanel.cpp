#include "meshpanel.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSpinBox>

#include "presentation.h"
#include "util/error.h"
#include "util/units.h"

namespace tp {

QValidator::State MeshShapeValidator::validate(QString& input, int&) const
{
    static const QRegularExpression partial(QStringLiteral("^([1-9][0-9]{0,4}([xX]([1-9][0-9]{0,4})?){0,2})?$"));
    if (!partial.match(input).hasMatch()) return Invalid;
    if (input.isEmpty() || input.endsWith(QLatin1Char('x'), Qt::CaseInsensitive)) return Intermediate;
    qint64 devices = 1;
    for (const auto& part : input.split(QLatin1Char('x'), Qt::SkipEmptyParts, Qt::CaseInsensitive)) devices *= part.toLongLong();
    return devices <= 65536 ? Acceptable : Invalid;
}

QValidator::State ByteQuantityValidator::validate(QString& input, int&) const
{
    const QString text = input.trimmed();
    if (text.isEmpty() || text == QLatin1String("none")) return Acceptable;
    if (QStringLiteral("none").startsWith(text)) return Intermediate;
    static const QRegularExpression shape(QStringLiteral("^[0-9.eE+]*\\s*[KMGTkmgt]?i?[Bb]?$"));
    if (!shape.match(text).hasMatch()) return Invalid;
    try {
        return parseBytes(text.toStdString()) > 0 ? Acceptable : Intermediate;
    } catch (const InputError&) {
        return Intermediate;
    }
}

MeshPanel::MeshPanel(QWidget* parent) : QWidget(parent)
{
    auto* form = new QFormLayout(this);
    hardware_ = new QComboBox(this);
    for (const auto& name : hardwarePresetNames()) hardware_->addItem(QString::fromStdString(name));
    form->addRow(tr("&Hardware"), hardware_);

    mesh_ = new QLineEdit(this);
    mesh_->setValidator(new MeshShapeValidator(mesh_));
    mesh_->setPlaceholderText(tr("8, 2x8, 4x4x8"));
    mesh_->setToolTip(tr("Mesh shape, outer to inner axes (x, y, z); the innermost axes fill a node first"));
    form->addRow(tr("&Mesh"), mesh_);
    axes_ = new QLabel(this);
    axes_->setWordWrap(true);
    form->addRow(QString(), axes_);

    intra_ = new QDoubleSpinBox(this);
    intra_->setRange(0, 10000);
    intra_->setSuffix(tr(" GB/s"));
    intra_->setSpecialValueText(tr("preset"));
    intra_->setToolTip(tr("Intra-node (NVLink) bandwidth per GPU per direction; 0 keeps the preset's"));
    form->addRow(tr("&Intra-node link"), intra_);
    inter_ = new QDoubleSpinBox(this);
    inter_->setRange(0, 10000);
    inter_->setSuffix(tr(" GB/s"));
    inter_->setSpecialValueText(tr("preset"));
    inter_->setToolTip(tr("Inter-node network bandwidth per GPU per direction; 0 keeps the preset's"));
    form->addRow(tr("I&nter-node link"), inter_);

    batch_ = new QSpinBox(this);
    batch_->setRange(0, 1 << 24);
    batch_->setSpecialValueText(tr("model's"));
    form->addRow(tr("&Batch (global)"), batch_);
    seq_ = new QSpinBox(this);
    seq_->setRange(0, 1 << 20);
    seq_->setSpecialValueText(tr("model's"));
    form->addRow(tr("&Sequence"), seq_);
    microBatch_ = new QSpinBox(this);
    microBatch_->setRange(0, 1 << 20);
    microBatch_->setSpecialValueText(tr("whole batch"));
    microBatch_->setToolTip(tr("Gradient accumulation: activations held for this many samples per data-parallel replica"));
    form->addRow(tr("Mi&cro-batch"), microBatch_);
    mode_ = new QComboBox(this);
    mode_->addItems({QStringLiteral("train"), QStringLiteral("infer")});
    form->addRow(tr("M&ode"), mode_);
    memoryLimit_ = new QLineEdit(this);
    memoryLimit_->setValidator(new ByteQuantityValidator(memoryLimit_));
    memoryLimit_->setPlaceholderText(tr("capacity (e.g. 80GiB, none)"));
    form->addRow(tr("Memory &limit"), memoryLimit_);

    connect(hardware_, &QComboBox::activated, this, [this] {
        if (document_) document_->setHardware(hardware_->currentText());
    });
    connect(mesh_, &QLineEdit::editingFinished, this, [this] {
        if (document_ && !updating_) document_->setMesh(mesh_->text().toLower());
    });
    auto links = [this] {
        if (document_ && !updating_) document_->setLinkBandwidths(intra_->value(), inter_->value());
    };
    connect(intra_, &QDoubleSpinBox::editingFinished, this, links);
    connect(inter_, &QDoubleSpinBox::editingFinished, this, links);
    connect(batch_, &QSpinBox::editingFinished, this, [this] {
        if (document_ && !updating_) document_->setBatch(batch_->value());
    });
    connect(seq_, &QSpinBox::editingFinished, this, [this] {
        if (document_ && !updating_) document_->setSeq(seq_->value());
    });
    connect(microBatch_, &QSpinBox::editingFinished, this, [this] {
        if (document_ && !updating_) document_->setMicroBatch(microBatch_->value());
    });
    connect(mode_, &QComboBox::activated, this, [this] {
        if (document_) document_->setMode(mode_->currentText());
    });
    connect(memoryLimit_, &QLineEdit::editingFinished, this, [this] {
        if (document_ && !updating_) document_->setMemoryLimit(memoryLimit_->text());
    });
}

void MeshPanel::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    if (document_) {
        connect(document_, &Document::settingsChanged, this, &MeshPanel::showSettings);
        connect(document_, &Document::planChanged, this, &MeshPanel::showMesh);
    }
    showSettings();
    showMesh();
}

void MeshPanel::showSettings()
{
    if (!document_) return;
    updating_ = true;
    const PlanSettings& s = document_->settings();
    hardware_->setCurrentText(QString::fromStdString(s.hardware));
    mesh_->setText(QString::fromStdString(s.mesh));
    intra_->setValue(s.intraNodeGBps);
    inter_->setValue(s.interNodeGBps);
    batch_->setValue(static_cast<int>(s.batch));
    seq_->setValue(static_cast<int>(s.seq));
    microBatch_->setValue(static_cast<int>(s.microBatch));
    mode_->setCurrentText(QString::fromStdString(s.mode));
    memoryLimit_->setText(QString::fromStdString(s.memoryLimit));
    updating_ = false;
}

void MeshPanel::showMesh()
{
    const PlanWorkspace* ws = document_ ? document_->workspace() : nullptr;
    if (!ws) {
        axes_->clear();
        return;
    }
    QStringList lines;
    for (const auto& axis : ws->mesh.axes)
        lines << tr("axis %1: %2 devices, %3 GB/s, %4 µs (%5)")
                     .arg(QString::fromStdString(axis.name))
                     .arg(axis.size)
                     .arg(axis.link.bandwidth / 1e9, 0, 'f', 0)
                     .arg(axis.link.latency * 1e6, 0, 'f', 1)
                     .arg(axis.crossesNodes ? tr("inter-node") : tr("intra-node"));
    lines << tr("%1, %2 HBM; batch %3, seq %4")
                 .arg(QString::fromStdString(ws->hardware.name), formatBytes(ws->hardware.hbmBytes))
                 .arg(ws->context.batch)
                 .arg(ws->context.seq);
    axes_->setText(lines.join(QLatin1Char('\n')));
}

} // namespace tp
