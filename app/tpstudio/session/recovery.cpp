#include "recovery.h"

#include <algorithm>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLockFile>
#include <QSaveFile>
#include <QStandardPaths>
#include <QUuid>

#include "document.h"
#include "import/catalog.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace tp {

namespace {

const char* kFormat = "tpstudio-recovery";
constexpr int kVersion = 1;
const char* kSuffix = ".tprecovery.json";

QString lockPathOf(const QString& recoveryPath)
{
    QString base = recoveryPath;
    base.chop(static_cast<int>(qstrlen(kSuffix)));
    return base + QStringLiteral(".lock");
}

} // namespace

std::string writeRecovery(const RecoveredProject& recovered)
{
    nlohmann::json json;
    json["format"] = kFormat;
    json["version"] = kVersion;
    json["saved"] = recovered.savedAt.toUTC().toString(Qt::ISODateWithMs).toStdString();
    json["file"] = recovered.originalPath.toStdString();
    json["project"] = nlohmann::json::parse(writeProject(recovered.project));
    return json.dump(1) + "\n";
}

RecoveredProject readRecovery(const std::string& text, const std::string& origin)
{
    checkJsonLimits(text, origin);
    nlohmann::json json;
    try {
        json = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw InputError(origin + ": not valid JSON: " + e.what());
    }
    auto field = [&](const char* key, nlohmann::json::value_t type) -> const nlohmann::json& {
        if (!json.is_object() || !json.contains(key)) throw InputError(origin + ": field '" + key + "' is missing");
        const auto& value = json[key];
        if (value.type() != type) throw InputError(origin + ": field '" + key + "' has the wrong type");
        return value;
    };
    if (field("format", nlohmann::json::value_t::string).get<std::string>() != kFormat)
        throw InputError(origin + ": field 'format' is not '" + kFormat + "'");
    const auto& version = json["version"];
    if (!version.is_number_integer() || version.get<std::int64_t>() != kVersion)
        throw InputError(origin + ": field 'version' must be " + std::to_string(kVersion));
    RecoveredProject r;
    r.savedAt = QDateTime::fromString(QString::fromStdString(field("saved", nlohmann::json::value_t::string).get<std::string>()),
                                      Qt::ISODateWithMs);
    r.originalPath = QString::fromStdString(field("file", nlohmann::json::value_t::string).get<std::string>());
    r.project = readProject(field("project", nlohmann::json::value_t::object).dump(), origin + " (project)");
    return r;
}

Recovery::Recovery(const QString& directory, QObject* parent) :
    QObject(parent),
    directory_(directory.isEmpty() ? defaultDirectory() : directory),
    id_(QUuid::createUuid().toString(QUuid::WithoutBraces))
{
    timer_.setInterval(defaultIntervalMs());
    connect(&timer_, &QTimer::timeout, this, &Recovery::autosave);
    if (!QDir().mkpath(directory_)) return;
    auto lock = std::make_unique<QLockFile>(QDir(directory_).filePath(id_ + QStringLiteral(".lock")));
    // Held for the whole session: it must never be judged stale by its age, only by its process.
    lock->setStaleLockTime(0);
    if (lock->tryLock(0)) lock_ = std::move(lock);
}

Recovery::~Recovery() = default;

QString Recovery::defaultDirectory()
{
    const QString env = qEnvironmentVariable("TPSTUDIO_RECOVERY_DIR");
    if (!env.isEmpty()) return env;
    return QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath(QStringLiteral("recovery"));
}

int Recovery::defaultIntervalMs()
{
    bool ok = false;
    const int ms = qEnvironmentVariableIntValue("TPSTUDIO_AUTOSAVE_MS", &ok);
    return ok && ms > 0 ? ms : 60 * 1000;
}

QString Recovery::filePath() const { return QDir(directory_).filePath(id_ + QLatin1String(kSuffix)); }

void Recovery::setDocument(Document* document)
{
    for (const auto& c : connections_) disconnect(c);
    connections_.clear();
    document_ = document;
    dirty_ = document && document->isModified();
    if (document) {
        // Any edit, undo or redo, and the clean state changing (a save, or undo back to it).
        connections_ << connect(document->undoStack(), &EditHistory::indexChanged, this, &Recovery::markDirty);
        connections_ << connect(document->undoStack(), &EditHistory::cleanChanged, this, &Recovery::markDirty);
        connections_ << connect(document, &Document::fileChanged, this, &Recovery::markDirty);
        if (isActive()) timer_.start();
    } else {
        timer_.stop();
    }
    autosave(); // a clean document leaves no file behind
}

void Recovery::setIntervalMs(int ms)
{
    timer_.setInterval(ms);
    if (timer_.isActive()) timer_.start();
}

bool Recovery::autosave()
{
    if (!isActive()) return false;
    if (!document_ || !document_->isModified()) {
        if (QFileInfo::exists(filePath())) QFile::remove(filePath());
        dirty_ = false;
        return false;
    }
    if (!dirty_ && QFileInfo::exists(filePath())) return false;
    RecoveredProject r;
    r.project = document_->projectData();
    // A relative model file is kept by its absolute path: the next session may start elsewhere.
    const QString model = QString::fromStdString(r.project.settings.model);
    if (!isBuiltinModel(r.project.settings.model) && QFileInfo(model).isRelative() && QFileInfo::exists(model))
        r.project.settings.model = QFileInfo(model).absoluteFilePath().toStdString();
    r.originalPath = document_->filePath().isEmpty() ? QString() : QFileInfo(document_->filePath()).absoluteFilePath();
    r.savedAt = QDateTime::currentDateTimeUtc();
    QSaveFile file(filePath());
    const QByteArray bytes = QByteArray::fromStdString(writeRecovery(r));
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size() || !file.commit()) {
        emit autosaveFailed(tr("%1: cannot write the recovery file: %2").arg(filePath(), file.errorString()));
        return false;
    }
    dirty_ = false;
    emit autosaved(filePath());
    return true;
}

void Recovery::finish()
{
    timer_.stop();
    for (const auto& c : connections_) disconnect(c);
    connections_.clear();
    document_ = nullptr;
    QFile::remove(filePath());
}

std::vector<RecoveryOrphan> Recovery::claimOrphans() const
{
    if (!isActive()) return {};
    std::vector<std::pair<QDateTime, RecoveryOrphan>> found;
    const QDir dir(directory_);
    const auto entries = dir.entryInfoList({QStringLiteral("*") + QLatin1String(kSuffix)}, QDir::Files);
    for (const QFileInfo& info : entries) {
        const QString path = info.absoluteFilePath();
        if (path == QFileInfo(filePath()).absoluteFilePath()) continue; // our own
        auto lock = std::make_shared<QLockFile>(lockPathOf(path));
        // Stale only when its process is gone (QLockFile checks the PID and the program's
        // name), never by age: a session may run for days.
        lock->setStaleLockTime(0);
        if (!lock->tryLock(0)) continue; // its session is running, or another instance claimed it
        found.push_back({info.lastModified(), RecoveryOrphan{path, std::move(lock)}});
    }
    // Locks of sessions that ended without edits to recover (killed with a clean document):
    // removed once their process is gone.
    for (const QFileInfo& info : dir.entryInfoList({QStringLiteral("*.lock")}, QDir::Files)) {
        QString base = info.absoluteFilePath();
        base.chop(5);
        if (QFileInfo::exists(base + QLatin1String(kSuffix)) ||
            info.absoluteFilePath() == QFileInfo(QDir(directory_).filePath(id_ + QStringLiteral(".lock"))).absoluteFilePath())
            continue;
        QLockFile stale(info.absoluteFilePath());
        stale.setStaleLockTime(0);
        if (stale.tryLock(0)) stale.unlock(); // removes it
    }
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<RecoveryOrphan> orphans;
    for (auto& f : found) orphans.push_back(std::move(f.second));
    return orphans;
}

void Recovery::removeOrphan(RecoveryOrphan& orphan)
{
    QFile::remove(orphan.path);
    if (orphan.lock) orphan.lock->unlock(); // removes the lock file
    orphan.lock.reset();
}

RecoveredProject Recovery::read(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        throw InputError(path.toStdString() + ": cannot open: " + file.errorString().toStdString());
    return readRecovery(file.readAll().toStdString(), path.toStdString());
}

} // namespace tp
