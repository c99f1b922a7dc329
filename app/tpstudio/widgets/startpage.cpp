#include "startpage.h"

#include <QFileInfo>
#include <QGridLayout>
#include <QGroupBox>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "import/catalog.h"

namespace tp {

namespace {

struct Family {
    const char* title;
    std::vector<const char*> prefixes;
};

// Families by name prefix; anything else lands in "Other".
const std::vector<Family>& families()
{
    static const std::vector<Family> list = {
        {"GPT", {"gpt"}},
        {"LLaMA", {"llama"}},
        {"BERT", {"bert"}},
        {"T5", {"t5"}},
        {"ViT", {"vit"}},
        {"ResNet", {"resnet", "wide-resnet"}},
        {"Mixture of experts", {"switch"}},
    };
    return list;
}

} // namespace

StartPage::StartPage(QWidget* parent) : QWidget(parent)
{
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(40, 30, 40, 30);
    auto* title = new QLabel(tr("<h1>TP Studio</h1><p>Open a model to see its folded structure and the best tensor/data-parallel "
                                "sharding of every operator. Drop a .tpgraph.json, .onnx, Hugging Face config.json, "
                                ".tpproj.json or .tpplan.json here, or pick a built-in model:</p>"),
                             this);
    title->setWordWrap(true);
    outer->addWidget(title);

    std::map<std::string, std::vector<std::string>> byFamily;
    for (const auto& name : builtinModelNames()) {
        std::string family = "Other";
        for (const auto& f : families())
            for (const char* prefix : f.prefixes)
                if (name.rfind(prefix, 0) == 0 && family == "Other") family = f.title;
        byFamily[family].push_back(name);
    }
    auto* grid = new QGridLayout;
    int cell = 0;
    auto addFamily = [&](const std::string& family) {
        const auto it = byFamily.find(family);
        if (it == byFamily.end()) return;
        auto* box = new QGroupBox(QString::fromStdString(family), this);
        auto* flow = new QGridLayout(box);
        int i = 0;
        for (const auto& name : it->second) {
            auto* button = new QPushButton(QString::fromStdString(name), box);
            button->setToolTip(QString::fromStdString(builtinModelConfig(name).value("description", std::string())));
            connect(button, &QPushButton::clicked, this, [this, name] { emit openRequested(QString::fromStdString(name)); });
            flow->addWidget(button, i / 3, i % 3);
            ++i;
        }
        grid->addWidget(box, cell / 3, cell % 3);
        ++cell;
    };
    for (const auto& f : families()) addFamily(f.title);
    addFamily("Other");
    outer->addLayout(grid);

    auto* open = new QPushButton(tr("Open file…"), this);
    connect(open, &QPushButton::clicked, this, &StartPage::openFileRequested);
    auto* row = new QHBoxLayout;
    row->addWidget(open);
    row->addStretch();
    outer->addLayout(row);
    auto* recentBox = new QGroupBox(tr("Recent"), this);
    recent_ = new QVBoxLayout(recentBox);
    outer->addWidget(recentBox);
    outer->addStretch();
}

void StartPage::setRecentFiles(const QStringList& files)
{
    while (QLayoutItem* item = recent_->takeAt(0)) {
        delete item->widget();
        delete item;
    }
    if (files.isEmpty()) recent_->addWidget(new QLabel(tr("Nothing yet."), this));
    for (const auto& file : files) {
        auto* button = new QPushButton(file, this);
        button->setFlat(true);
        button->setStyleSheet(QStringLiteral("text-align: left;"));
        connect(button, &QPushButton::clicked, this, [this, file] { emit openRequested(file); });
        recent_->addWidget(button);
    }
}

} // namespace tp
