#pragma once
// Nothing lost (issue #10): while a document has unsaved edits, the GUI writes it every minute
// to a recovery file, atomically (QSaveFile). A clean exit removes the file. A session that
// ended any other way (crash, SIGKILL, power cut) leaves it behind, and the next start offers to
// restore it.
//
// Each running session owns one recovery file `<id>.tprecovery.json` and holds the lock file
// `<id>.lock` (QLockFile: PID, host and application name) for as long as it runs. A recovery
// file is an orphan when its lock is free: no lock file, or one whose process is gone. Claiming
// an orphan takes its lock, so two instances started together never both restore (or delete)
// the same file, and a running instance never loses its file to another.
#include <memory>
#include <vector>

#include <QDateTime>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QTimer>

#include "plansettings.h"

class QLockFile;

namespace tp {

class Document;

/// What a recovery file holds: the project (settings, locks, view state) and the project file
/// the edits belong to ("" when it was never saved).
struct RecoveredProject {
    ProjectData project;
    QString originalPath;
    QDateTime savedAt;
};

/// The recovery file format: {"format": "tpstudio-recovery", "version": 1, "saved": ISO time,
/// "file": original path, "project": the .tpproj.json object}.
std::string writeRecovery(const RecoveredProject& recovered);
/// Throws InputError naming the file and the field at fault.
RecoveredProject readRecovery(const std::string& text, const std::string& origin);

/// A recovery file left by a session that is not running, with its lock held by us.
struct RecoveryOrphan {
    QString path;
    std::shared_ptr<QLockFile> lock;
};

class Recovery : public QObject {
    Q_OBJECT
public:
    /// `directory` empty: defaultDirectory(). Creates the directory and takes this session's
    /// lock; isActive() is false if either fails (then nothing is written).
    explicit Recovery(const QString& directory = {}, QObject* parent = nullptr);
    /// Releases the lock but keeps the file: only finish() (a clean exit) removes it.
    ~Recovery() override;

    /// $TPSTUDIO_RECOVERY_DIR, else QStandardPaths::AppDataLocation + "/recovery".
    static QString defaultDirectory();
    /// $TPSTUDIO_AUTOSAVE_MS, else one minute.
    static int defaultIntervalMs();

    bool isActive() const { return lock_ != nullptr; }
    QString directory() const { return directory_; }
    QString filePath() const; ///< this session's recovery file

    /// The document to watch (null: none). Its file is brought up to date at once: removed when
    /// the document is clean.
    void setDocument(Document* document);
    void setIntervalMs(int ms);
    int intervalMs() const { return timer_.interval(); }

    /// What the timer does: writes the document if it has edits not written yet, removes the
    /// file when it has none. Returns true when it wrote.
    bool autosave();
    /// A clean exit: removes this session's file (the lock goes with the object).
    void finish();

    /// Recovery files of sessions that are not running, newest first, each claimed (locked).
    std::vector<RecoveryOrphan> claimOrphans() const;
    /// Deletes a claimed orphan and its lock.
    static void removeOrphan(RecoveryOrphan& orphan);
    /// Reads a recovery file; throws InputError.
    static RecoveredProject read(const QString& path);

signals:
    void autosaved(const QString& path);
    void autosaveFailed(const QString& message);

private:
    void markDirty() { dirty_ = true; }

    QString directory_;
    QString id_;
    std::unique_ptr<QLockFile> lock_;
    QPointer<Document> document_;
    QTimer timer_;
    bool dirty_ = false;
    QList<QMetaObject::Connection> connections_;
};

} // namespace tp
