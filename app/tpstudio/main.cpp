#include <QApplication>
#include <QCommandLineParser>

#include "mainwindow.h"

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("TP Studio"));
    QApplication::setOrganizationName(QStringLiteral("TP Studio"));
    QCommandLineParser parser;
    parser.addHelpOption();
    parser.addPositionalArgument(QStringLiteral("model"), QStringLiteral("built-in model name or file"));
    parser.process(app);
    tp::MainWindow window;
    window.openModel(parser.positionalArguments().value(0, QStringLiteral("gpt3-175b")));
    window.show();
    return app.exec();
}
