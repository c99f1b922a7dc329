#pragma once
// Helpers shared by the GUI tests that drive a Document (tst_gui, tst_recovery).
#include <string>

#include <QSignalSpy>

#include "document.h"

namespace tp::test {

/// The op called `name` in the document's current graph, or -1.
inline OpId opNamed(const Document& doc, const std::string& name)
{
    for (const auto& op : doc.workspace()->model.graph.ops)
        if (op.name == name) return op.id;
    return -1;
}

/// Waits up to `timeoutMs` for the next plan to be applied to the document.
inline bool waitForPlan(Document& doc, int timeoutMs)
{
    QSignalSpy spy(&doc, &Document::planChanged);
    return spy.wait(timeoutMs);
}

} // namespace tp::test
