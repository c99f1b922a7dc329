#pragma once
// The one exception type of the core: bad input from a user or a file. Its message names the
// file, op or field at fault, so a front end can print it as one line and exit.
#include <stdexcept>
#include <string>

namespace tp {

class InputError : public std::runtime_error {
public:
    explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

/// Long work (a search, a layout) stopped because its caller asked it to: not an error to
/// report, the caller already knows.
class Cancelled : public std::runtime_error {
public:
    Cancelled() : std::runtime_error("cancelled") {}
};

} // namespace tp
