#include "mainwindow.h"

#include <QLabel>
#include <QStatusBar>

#include "graph/stats.h"
#include "models/catalog.h"
#include "util/error.h"

namespace tp {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent)
{
    setWindowTitle(QStringLiteral("TP Studio"));
    resize(1280, 800);
}

bool MainWindow::openModel(const QString& source)
{
    try {
        const auto model = loadModel(source.toStdString());
        const auto stats = computeStats(model.graph);
        auto* label = new QLabel(QStringLiteral("<h2>%1</h2><p>%2 ops, %3 parameters</p>")
                                     .arg(QString::fromStdString(model.name))
                                     .arg(stats.ops)
                                     .arg(stats.params));
        label->setAlignment(Qt::AlignCenter);
        setCentralWidget(label);
        statusBar()->showMessage(tr("Opened %1").arg(source));
        return true;
    } catch (const InputError& e) {
        statusBar()->showMessage(QString::fromStdString(e.what()));
        return false;
    }
}

} // namespace tp
