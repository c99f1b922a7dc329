#include "meshpanel.h"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QRegularExpressionValidator>
#include <QSpinBox>
#include <QStyledItemDelegate>
#include <QTableWidget>

#include "plan/plan_file.h"
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

namespace {

enum OverrideRoles { KindRole = Qt::UserRole + 1, OwnValueRole, ShownRole };

/// Keys the table does not offer: descriptive, or edited by their own fields.
bool hiddenConfigKey(const std::string& key)
{
    return key == "family" || key == "description" || key == "name" || key == "batch" || key == "seq";
}

QString configValueText(const nlohmann::json& v)
{
    if (v.is_string()) return QString::fromStdString(v.get<std::string>());
    if (v.is_array()) {
        QStringList parts;
        for (const auto& x : v) parts << QString::fromStdString(x.dump());
        return parts.join(QLatin1Char(','));
    }
    return QString::fromStdString(v.dump());
}

QRegularExpression partialValuePattern(const QString& kind)
{
    if (kind == QLatin1String("int")) return QRegularExpression(QStringLiteral("^[0-9]{0,12}$"));
    if (kind == QLatin1String("number")) return QRegularExpression(QStringLiteral("^[0-9]*\\.?[0-9]*([eE][-+]?[0-9]{0,3})?$"));
    if (kind == QLatin1String("bool")) return QRegularExpression(QStringLiteral("^(t(r(ue?)?)?|f(a(l(se?)?)?)?)?$"));
    if (kind == QLatin1String("list")) return QRegularExpression(QStringLiteral("^([0-9]{1,9}(,[0-9]{0,9})*)?$"));
    return QRegularExpression(QStringLiteral("^[^=]*$"));
}

/// The value column's editor refuses keystrokes that cannot lead to a value of the key's kind.
class OverrideDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    QWidget* createEditor(QWidget* parent, const QStyleOptionViewItem& option, const QModelIndex& index) const override
    {
        QWidget* editor = QStyledItemDelegate::createEditor(parent, option, index);
        if (auto* line = qobject_cast<QLineEdit*>(editor)) {
            const QString kind = index.data(KindRole).toString();
            line->setValidator(new QRegularExpressionValidator(partialValuePattern(kind), line));
            line->setPlaceholderText(tr("model's own: %1").arg(index.data(OwnValueRole).toString()));
        }
        return editor;
    }
};

} // namespace

QString MeshPanel::valueKind(const nlohmann::json& v)
{
    if (v.is_boolean()) return QStringLiteral("bool");
    if (v.is_number_integer()) return QStringLiteral("int");
    if (v.is_number()) return QStringLiteral("number");
    if (v.is_array()) return QStringLiteral("list");
    return QStringLiteral("text");
}

bool MeshPanel::checkValue(const QString& kind, const QString& text, QString* reason)
{
    auto refuse = [&](const QString& why) {
        if (reason) *reason = why;
        return false;
    };
    if (kind == QLatin1String("int")) {
        static const QRegularExpression digits(QStringLiteral("^[0-9]+$"));
        bool ok = false;
        const qlonglong v = text.toLongLong(&ok);
        if (!digits.match(text).hasMatch() || !ok || v <= 0) return refuse(tr("must be a positive integer, not '%1'").arg(text));
        return true;
    }
    if (kind == QLatin1String("number")) {
        bool ok = false;
        const double v = text.toDouble(&ok);
        if (!ok || !(v > 0) || !std::isfinite(v)) return refuse(tr("must be a positive number, not '%1'").arg(text));
        return true;
    }
    if (kind == QLatin1String("bool")) {
        if (text != QLatin1String("true") && text != QLatin1String("false"))
            return refuse(tr("must be true or false, not '%1'").arg(text));
        return true;
    }
    if (kind == QLatin1String("list")) {
        static const QRegularExpression list(QStringLiteral("^[1-9][0-9]*(,[1-9][0-9]*)*$"));
        if (!list.match(text).hasMatch())
            return refuse(tr("must be positive integers separated by commas, such as 3,4,6,3, not '%1'").arg(text));
        return true;
    }
    if (text.isEmpty() || text.contains(QLatin1Char('='))) return refuse(tr("must be a non-empty text without '='"));
    return true;
}

MeshPanel::MeshPanel(QWidget* parent) :
    QWidget(parent),
    overrideCheck_([this](quint64, OverrideCheck check) { finishOverrideCheck(check); })
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
    microBatch_->setRange(kAuto, 1 << 20);
    microBatch_->setSpecialValueText(tr("auto"));
    microBatch_->setToolTip(tr("Gradient accumulation: activations held for this many samples per data-parallel replica "
                               "(auto: the planner chooses; 0: the whole local batch at once)"));
    form->addRow(tr("Mi&cro-batch"), microBatch_);
    zero_ = new QComboBox(this);
    zero_->setObjectName(QStringLiteral("zeroStage"));
    zero_->addItem(tr("auto"), kAuto);
    zero_->addItem(tr("0: replicated"), 0);
    zero_->addItem(tr("1: optimizer states"), 1);
    zero_->addItem(tr("2: + gradients"), 2);
    zero_->addItem(tr("3: + parameters (FSDP)"), 3);
    zero_->setToolTip(tr("ZeRO: shard model states over each weight's data-parallel axes (auto: the planner chooses)"));
    form->addRow(tr("&ZeRO"), zero_);
    pipeline_ = new QComboBox(this);
    pipeline_->setObjectName(QStringLiteral("pipelineStages"));
    pipeline_->setToolTip(tr("Pipeline stages over the outermost mesh axis (auto: the planner chooses, none where no "
                             "pipeline is faster)"));
    form->addRow(tr("&Pipeline"), pipeline_);
    schedule_ = new QComboBox(this);
    schedule_->setObjectName(QStringLiteral("pipelineSchedule"));
    schedule_->addItem(tr("1F1B"), QStringLiteral("1f1b"));
    schedule_->addItem(tr("auto"), QStringLiteral("auto"));
    for (int v : {2, 3, 4, 6, 8}) schedule_->addItem(tr("interleaved, %1 chunks").arg(v), QStringLiteral("interleaved:%1").arg(v));
    schedule_->setToolTip(tr("How each device runs its stages: 1F1B, or interleaved with V chunks per device (a smaller "
                             "bubble, more activations and sends); auto: the planner chooses"));
    form->addRow(tr("Sc&hedule"), schedule_);
    stageLayers_ = new QComboBox(this);
    stageLayers_->setObjectName(QStringLiteral("stageLayers"));
    stageLayers_->addItem(tr("balanced"), QStringLiteral("auto"));
    stageLayers_->addItem(tr("even"), QStringLiteral("even"));
    stageLayers_->setToolTip(tr("Where the stage boundaries fall: balanced (the planner moves layers off the slowest stage, "
                                "as Megatron-LM's first and last stage layers do), or even"));
    form->addRow(tr("Stage &layers"), stageLayers_);
    choice_ = new QLabel(this);
    choice_->setObjectName(QStringLiteral("settingsChoice"));
    choice_->setWordWrap(true);
    form->addRow(QString(), choice_);
    stages_ = new QLabel(this);
    stages_->setObjectName(QStringLiteral("pipelineStageList"));
    stages_->setTextFormat(Qt::RichText);
    stages_->setToolTip(tr("The stages the planner solves (the second stands for every middle stage): their layers, "
                           "step with sends, and memory per device against the device's capacity. Click a stage to "
                           "show its plan in every view (View > Next / Previous Pipeline Stage: Ctrl+] / Ctrl+[)"));
    // A stage's number is a link: the views show that stage (Document::showStage).
    connect(stages_, &QLabel::linkActivated, this, [this](const QString& link) {
        if (document_ && link.startsWith(QLatin1String("stage:"))) document_->showStage(link.mid(6).toInt());
    });
    form->addRow(tr("Stages"), stages_);
    form_ = form;
    mode_ = new QComboBox(this);
    mode_->addItems({QStringLiteral("train"), QStringLiteral("infer")});
    form->addRow(tr("M&ode"), mode_);
    memoryLimit_ = new QLineEdit(this);
    memoryLimit_->setValidator(new ByteQuantityValidator(memoryLimit_));
    memoryLimit_->setPlaceholderText(tr("capacity (e.g. 80GiB, none)"));
    form->addRow(tr("Memory &limit"), memoryLimit_);
    overlap_ = new QSpinBox(this);
    overlap_->setRange(1, kMaxOverlapChunks);
    overlap_->setSpecialValueText(tr("off"));
    overlap_->setSuffix(tr(" chunks"));
    overlap_->setToolTip(
        tr("Chunked overlap (ATP): matmuls run in this many chunks so that each chunk's collective hides under the "
           "next chunk's compute; off (1) exposes every collective"));
    form->addRow(tr("O&verlap"), overlap_);

    overrides_ = new QTableWidget(0, 2, this);
    overrides_->setObjectName(QStringLiteral("modelOverrides"));
    overrides_->setHorizontalHeaderLabels({tr("Key"), tr("Value")});
    overrides_->verticalHeader()->hide();
    overrides_->horizontalHeader()->setStretchLastSection(true);
    overrides_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    overrides_->setSelectionMode(QAbstractItemView::SingleSelection);
    overrides_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed |
                                QAbstractItemView::AnyKeyPressed);
    overrides_->setItemDelegateForColumn(1, new OverrideDelegate(overrides_));
    overrides_->setMinimumHeight(140);
    overrides_->setToolTip(
        tr("The model's config (tpplan --set key=value): edit a value to override it; clear it for the model's own"));
    form->addRow(tr("Model &overrides"), overrides_);
    overrideMessage_ = new QLabel(this);
    overrideMessage_->setWordWrap(true);
    overrideMessage_->setStyleSheet(QStringLiteral("color: #b00020;"));
    overrideMessage_->hide();
    form->addRow(QString(), overrideMessage_);

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
    connect(zero_, &QComboBox::activated, this, [this] {
        if (document_) document_->setZeroStage(zero_->currentData().toInt());
    });
    auto setPipeline = [this] {
        if (document_)
            document_->setPipeline(pipeline_->currentData().toInt(), schedule_->currentData().toString(),
                                   stageLayers_->currentData().toString());
    };
    connect(pipeline_, &QComboBox::activated, this, setPipeline);
    connect(schedule_, &QComboBox::activated, this, setPipeline);
    connect(stageLayers_, &QComboBox::activated, this, setPipeline);
    connect(mode_, &QComboBox::activated, this, [this] {
        if (document_) document_->setMode(mode_->currentText());
    });
    connect(memoryLimit_, &QLineEdit::editingFinished, this, [this] {
        if (document_ && !updating_) document_->setMemoryLimit(memoryLimit_->text());
    });
    connect(overlap_, &QSpinBox::editingFinished, this, [this] {
        if (!document_ || updating_) return;
        PlanSettings s = document_->settings();
        s.overlapChunks = overlap_->value();
        document_->setSettings(s, s.overlapChunks > 1 ? tr("Overlap %1 chunks").arg(s.overlapChunks) : tr("Overlap off"));
    });
    connect(overrides_, &QTableWidget::itemChanged, this, [this](QTableWidgetItem* item) {
        if (!updating_ && item->column() == 1) commitOverride(item);
    });
}

int MeshPanel::overrideRow(const QString& key) const
{
    for (int row = 0; row < overrides_->rowCount(); ++row)
        if (overrides_->item(row, 0) && overrides_->item(row, 0)->text() == key) return row;
    return -1;
}

QString MeshPanel::overrideMessage() const { return overrideMessage_->text(); }

void MeshPanel::refuseOverride(const QString& key, const QString& message)
{
    overrideMessage_->setText(message);
    overrideMessage_->show();
    // Put the value the field showed back (only this cell: its editor may still be closing).
    if (const int row = overrideRow(key); row >= 0) {
        const bool wasUpdating = updating_;
        updating_ = true;
        QTableWidgetItem* item = overrides_->item(row, 1);
        item->setText(item->data(ShownRole).toString());
        updating_ = wasUpdating;
    }
    emit overrideRefused(key, message);
}

void MeshPanel::commitOverride(QTableWidgetItem* item)
{
    if (!document_) return;
    const int row = item->row();
    const QString key = overrides_->item(row, 0)->text();
    const QString kind = item->data(KindRole).toString();
    const QString own = item->data(OwnValueRole).toString();
    QString text = item->text().trimmed();
    if (text.isEmpty() || text == own) text.clear(); // the model's own value: no override
    const PlanSettings before = document_->settings();
    if (text.toStdString() == overrideValue(before.overrides, key.toStdString())) {
        const bool wasUpdating = updating_; // no change: show the value as the table had it
        updating_ = true;
        item->setText(item->data(ShownRole).toString());
        updating_ = wasUpdating;
        return;
    }
    QString reason;
    if (!text.isEmpty() && !checkValue(kind, text, &reason)) {
        refuseOverride(key, tr("%1: %2").arg(key, reason));
        return;
    }
    PlanSettings next = before;
    next.overrides = withOverride(before.overrides, key.toStdString(), text.toStdString());
    // The builder checks the config as a whole (heads dividing hidden, ...): build it off the GUI
    // thread, and only an accepted value becomes an edit.
    OverrideCheck check{key, text, before, next, {}};
    overrideCheck_.start([check](const std::atomic<bool>&) {
        OverrideCheck out = check;
        try {
            const PlanRequest request = out.next.toRequest({});
            loadModel(request.model, request.modelOptions);
        } catch (const std::exception& e) {
            out.error = QString::fromStdString(e.what());
        }
        return out;
    });
}

void MeshPanel::finishOverrideCheck(const OverrideCheck& check)
{
    const QString& key = check.key;
    const QString& text = check.text;
    if (!document_) return;
    if (!check.error.isEmpty()) {
        refuseOverride(key, tr("%1 = %2 refused: %3").arg(key, text, check.error));
        return;
    }
    if (document_->settings().overrides != check.before.overrides) return; // edited meanwhile (undo, open)
    overrideMessage_->clear();
    overrideMessage_->hide();
    PlanSettings s = document_->settings();
    s.overrides = check.next.overrides;
    document_->setSettings(s, text.isEmpty() ? tr("Reset %1").arg(key) : tr("Override %1=%2").arg(key, text));
    emit overrideAccepted(key, text);
}

void MeshPanel::showOverrides()
{
    const PlanWorkspace* ws = document_ ? document_->workspace() : nullptr;
    const PlanSettings* s = document_ ? &document_->settings() : nullptr;
    // The rows follow the workspace's effective config; values the document overrides since
    // (an edit whose plan is still coming) show as typed.
    const nlohmann::json config = ws && ws->model.config.is_object() ? ws->model.config : nlohmann::json();
    QString shown = QString::fromStdString(config.dump());
    if (s) {
        shown += QString::fromStdString(s->model);
        for (const auto& o : s->overrides) shown += QLatin1Char('|') + QString::fromStdString(o);
    }
    if (shown == overridesShown_) return;
    overridesShown_ = shown;
    nlohmann::json own;
    if (s && isBuiltinModel(s->model)) own = builtinModelConfig(s->model);
    const bool wasUpdating = updating_;
    updating_ = true;
    overrides_->setRowCount(0);
    overrides_->setEnabled(config.is_object());
    if (config.is_object()) {
        for (const auto& [key, value] : config.items()) {
            if (hiddenConfigKey(key) || value.is_object() || value.is_null()) continue;
            if (value.is_array() && !std::all_of(value.begin(), value.end(), [](const auto& x) { return x.is_number_integer(); }))
                continue;
            const QString qkey = QString::fromStdString(key);
            const std::string overridden = s ? overrideValue(s->overrides, key) : std::string();
            const nlohmann::json& base = own.is_object() && own.contains(key) ? own[key] : value;
            const int row = overrides_->rowCount();
            overrides_->insertRow(row);
            auto* k = new QTableWidgetItem(qkey);
            k->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
            auto* v = new QTableWidgetItem(overridden.empty() ? configValueText(value) : QString::fromStdString(overridden));
            v->setData(KindRole, valueKind(base));
            v->setData(OwnValueRole, configValueText(base));
            v->setData(ShownRole, v->text());
            if (!overridden.empty()) {
                QFont bold = v->font();
                bold.setBold(true);
                k->setFont(bold);
                v->setFont(bold);
                v->setToolTip(tr("Overridden (the model's own: %1); clear the value to reset").arg(configValueText(base)));
            } else {
                v->setToolTip(tr("The model's own value; edit it to override (tpplan --set %1=...)").arg(qkey));
            }
            overrides_->setItem(row, 0, k);
            overrides_->setItem(row, 1, v);
        }
    }
    overrides_->setToolTip(
        config.is_object()
            ? tr("The model's config (tpplan --set key=value): edit a value to override it; clear it for the model's own")
            : tr("Overrides apply to built-in models and config.json files, not to graph or ONNX files"));
    updating_ = wasUpdating;
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
    zero_->setCurrentIndex(std::max(0, zero_->findData(s.zero)));
    showPipelineChoices(s);
    mode_->setCurrentText(QString::fromStdString(s.mode));
    memoryLimit_->setText(QString::fromStdString(s.memoryLimit));
    overlap_->setValue(s.overlapChunks);
    updating_ = false;
    showOverrides();
}

void MeshPanel::showPipelineChoices(const PlanSettings& s)
{
    // The stages divide the outermost axis of the mesh as typed ("8x8": 2, 4, 8).
    const QString text = QString::fromStdString(s.mesh);
    const int outer = std::max(1, text.section(QLatin1Char('x'), 0, 0).toInt());
    pipeline_->clear();
    pipeline_->addItem(tr("none"), 1);
    pipeline_->addItem(tr("auto"), kAuto);
    for (int p = 2; p <= outer; ++p)
        if (outer % p == 0) pipeline_->addItem(tr("%1 stages").arg(p), p);
    if (pipeline_->findData(s.pipeline) < 0) pipeline_->addItem(tr("%1 stages").arg(s.pipeline), s.pipeline);
    pipeline_->setCurrentIndex(pipeline_->findData(s.pipeline));
    const QString schedule = QString::fromStdString(s.schedule);
    if (schedule_->findData(schedule) < 0) schedule_->addItem(schedule, schedule);
    schedule_->setCurrentIndex(schedule_->findData(schedule));
    schedule_->setEnabled(s.pipeline != 1);
    // A fixed split ("F,L": a pipeline pinned by a lock, or a project's) is listed as such.
    const QString split = QString::fromStdString(s.stageLayers);
    if (stageLayers_->findData(split) < 0) {
        const QStringList ends = split.split(QLatin1Char(','));
        stageLayers_->addItem(ends.size() == 2 ? tr("first %1, last %2").arg(ends[0], ends[1]) : split, split);
    }
    stageLayers_->setCurrentIndex(stageLayers_->findData(split));
    stageLayers_->setEnabled(s.pipeline != 1);
}

void MeshPanel::showStages()
{
    const std::shared_ptr<const PlanOutcome> plan = document_ ? document_->plan() : nullptr;
    const bool pipelined = plan && plan->pipeline;
    form_->setRowVisible(stages_, pipelined);
    if (!pipelined) return;
    const PipelinePlan& p = *plan->pipeline;
    constexpr int kBar = 16;
    const int shown = stagePlanIndex(p, document_->shownStage());
    QString rows;
    for (const auto& st : p.stages) {
        const PipelineStageInfo& info = st.workspace->stage;
        const double capacity = st.workspace->hardware.hbmBytes;
        const double share = capacity > 0 ? st.result.breakdown.perDeviceBytes / capacity : 0;
        const int filled = std::clamp(static_cast<int>(std::lround(share * kBar)), 0, kBar);
        const QString which = st.standsFor > 1 ? tr("%1-%2").arg(st.stage + 1).arg(st.stage + st.standsFor) : QString::number(st.stage + 1);
        const QString colour = st.result.fits ? QStringLiteral("#3a7bd5") : QStringLiteral("#d0021b");
        const bool isShown = &st == &p.stages[static_cast<size_t>(std::max(shown, 0))];
        rows += tr("<tr><td>%1</td><td align='right'>%2</td><td align='right'>%3%4</td><td><span style='color:%5'>%6</span>"
                   "<span style='color:#d8d8d8'>%7</span> %8</td></tr>")
                    .arg(isShown ? QStringLiteral("<b>%1 &#9664;</b>").arg(which)
                                 : QStringLiteral("<a href='stage:%1'>%2</a>").arg(st.stage).arg(which))
                    .arg(info.layers)
                    .arg(QString::fromStdString(formatSeconds(st.stepSeconds())),
                         st.stage == p.stages[static_cast<size_t>(p.slowest)].stage ? tr(" (slowest)") : QString(), colour,
                         QString(filled, QChar(0x2588)), QString(kBar - filled, QChar(0x2588)),
                         QString::fromStdString(formatBytes(st.result.breakdown.perDeviceBytes)));
    }
    stages_->setText(tr("<table cellspacing='0' cellpadding='2'><tr><th align='left'>stage</th><th>layers</th><th>step</th>"
                        "<th align='left'>memory per device</th></tr>") +
                     rows + QStringLiteral("</table>"));
}

void MeshPanel::showMesh()
{
    showOverrides();
    const PlanWorkspace* ws = document_ ? document_->workspace() : nullptr;
    if (!ws) {
        axes_->clear();
        choice_->clear();
        showStages();
        return;
    }
    const CostSettings& chosen = ws->costModel->settings();
    const std::string summary = choiceSummary(document_->plan()->candidates);
    QString choice = summary.empty() ? tr("%1 (as set)").arg(QString::fromStdString(settingsText(candidateOf(chosen))))
                                     : tr("Chosen: %1").arg(QString::fromStdString(summary));
    if (const auto& pipeline = document_->plan()->pipeline) {
        const int shown = document_->shownStage();
        const bool slowest = shown == pipeline->stages[static_cast<size_t>(pipeline->slowest)].stage;
        choice = tr("Pipeline: %1. Shown: stage %2's plan%3; %4")
                     .arg(QString::fromStdString(pipelineSummary(*pipeline)), QString::number(shown + 1),
                          slowest ? tr(" (the slowest)") : QString(), choice);
    }
    choice_->setText(choice);
    showStages();
    QStringList lines;
    // A pipeline's views show one stage: its mesh is the whole mesh less the pipeline axis.
    if (ws->stage.stage >= 0)
        lines << tr("pipeline over axis %1: %2 stages, %3; each stage on mesh %4:")
                     .arg(QString::fromStdString(ws->stage.link.name))
                     .arg(ws->stage.schedule.stages)
                     .arg(QString::fromStdString(formatBandwidth(ws->stage.link.link.bandwidth)),
                          QString::fromStdString(ws->mesh.shapeText()));
    for (const auto& axis : ws->mesh.axes)
        lines << tr("axis %1: %2 devices, %3, %4 (%5)")
                     .arg(QString::fromStdString(axis.name))
                     .arg(axis.size)
                     .arg(QString::fromStdString(formatBandwidth(axis.link.bandwidth)),
                          QString::fromStdString(formatSeconds(axis.link.latency)),
                          axis.crossesNodes ? tr("inter-node") : tr("intra-node"));
    lines << tr("%1, %2 HBM; batch %3, seq %4")
                 .arg(QString::fromStdString(ws->hardware.name), QString::fromStdString(formatBytes(ws->hardware.hbmBytes)))
                 .arg(ws->context.batch)
                 .arg(ws->context.seq);
    const Breakdown& b = document_->plan()->result.breakdown;
    // Hidden: under chunked overlap (the setting here) and gradient reduction under backward.
    const int chunks = ws->costModel->settings().overlapChunks;
    const QString exposed = QString::fromStdString(formatSeconds(b.exposedCommSeconds));
    const QString hidden = QString::fromStdString(formatSeconds(b.hiddenCommSeconds));
    if (chunks > 1)
        lines << tr("communication %1 exposed, %2 hidden under compute (%3-chunk overlap, gradients during backward)")
                     .arg(exposed, hidden)
                     .arg(chunks);
    else if (b.hiddenCommSeconds > 0)
        lines << tr("communication %1 exposed, %2 hidden under compute (gradients during backward)").arg(exposed, hidden);
    else
        lines << tr("communication %1, all exposed (no overlap)").arg(exposed);
    axes_->setText(lines.join(QLatin1Char('\n')));
}

} // namespace tp
