#pragma once
#include "graph.h"

namespace tp {

/// Checks that the graph is well formed: ids are indices, every referenced tensor exists, each
/// activation has one producer, weights and inputs have none, dims are positive and their
/// product fits in int64, each op's arity matches its kind and its shapes fit its equation,
/// and there is no cycle. Throws InputError naming the op or tensor and the field at fault.
void validateGraph(const Graph& graph);

} // namespace tp
