#pragma once
// The start page: the built-in models by family and size, recent files, and Open.
#include <QWidget>

class QVBoxLayout;

namespace tp {

class StartPage : public QWidget {
    Q_OBJECT
public:
    explicit StartPage(QWidget* parent = nullptr);
    void setRecentFiles(const QStringList& files);

signals:
    void openRequested(const QString& source);
    void openFileRequested();

private:
    QVBoxLayout* recent_;
};

} // namespace tp
