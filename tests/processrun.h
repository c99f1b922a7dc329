#pragma once
// Runs a program to completion for the end-to-end tests (tst_cli, tst_calibrate): its exit
// code (-1 when it crashed or ran past the timeout, then killed), stdout and stderr.
#include <QByteArray>
#include <QProcess>
#include <QString>
#include <QStringList>

struct ProcessRun {
    int code;
    QByteArray out;
    QByteArray err;
};

inline ProcessRun runProcess(const QString& program, const QStringList& args, int timeoutMs = 120000)
{
    QProcess p;
    p.start(program, args);
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        return {-1, p.readAllStandardOutput(), "timed out: " + p.readAllStandardError()};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(), p.readAllStandardError()};
}

/// The tpplan this build made (TP_TPPLAN, tests/CMakeLists.txt).
inline ProcessRun runTpplan(const QStringList& args, int timeoutMs = 120000)
{
    return runProcess(QStringLiteral(TP_TPPLAN), args, timeoutMs);
}
