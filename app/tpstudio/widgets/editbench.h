#pragma once
// `tpstudio MODEL --bench-edits N`: the GUI's edit-to-update time, measured the way a user
// sees it (offscreen). After the first plan is on screen it makes N edits one after the other,
// alternately locking an op of a middle layer to another candidate and unlocking it, and times
// each from the edit to the new plan applied to every view and the window repainted. Prints
// one JSON object to stdout (read by `tpplan bench`, case gui).
#include <QString>

namespace tp {

class MainWindow;

/// Starts the measurement once the window's document has its first plan; quits the
/// application with 0 after printing, or 2 with a message on stderr.
void startEditBenchmark(MainWindow& window, int edits);

} // namespace tp
