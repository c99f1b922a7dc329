#pragma once
// Where a plan that does not fit would fit: the preset meshes, fewest devices first, and the
// smallest of them on which the planner's plan fits the memory limit. The GUI's status bar and
// `tpplan plan` name it when no plan fits the mesh asked for (docs/ARCHITECTURE.md, "Settings
// the planner chooses").
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "planner.h"

namespace tp {

/// The preset meshes, fewest devices first: 1, 2, 4, ... devices of one node, the whole node
/// of `gpusPerNode` GPUs, then 2, 4, ..., 64 such nodes ("1", "2", "4", "8", "2x8", ..., "64x8"
/// for 8-GPU nodes).
std::vector<std::string> presetMeshes(int gpusPerNode);

/// A preset mesh on which a plan fits, and that plan.
struct MeshFit {
    std::string mesh;       ///< "8x8"
    int devices = 0;        ///< 64
    double stepSeconds = 0; ///< the plan's step time there
    double bytes = 0;       ///< its memory per device
    std::string settings;   ///< what the planner chose there (settingsText), empty when fixed
    int meshesSearched = 0; ///< meshes planned to find it (this one included); the rest were skipped by the bound
};

/// The smallest preset mesh (presetMeshes of the request's hardware) with more devices than
/// `current`'s on which the planner finds a plan of `request` that fits its memory limit: the
/// same model, hardware, limit and settings (those left to the planner are chosen anew), the
/// locks dropped (they name the current mesh's axes). A mesh on which the model states alone,
/// spread evenly over every device, exceed the limit is skipped without a search: no layout
/// stores less per device than that. std::nullopt when none fits or the request has no limit.
/// Throws tp::Cancelled when `cancel` is set.
std::optional<MeshFit> smallestFittingMesh(const PlanRequest& request, const PlanWorkspace& current,
                                           const std::atomic<bool>* cancel = nullptr);

/// "fits on 8x8 (64 devices): 241.3 s per step, 79.63 GiB per device, ZeRO 3, micro-batch 6":
/// the one text for the hint, CLI and GUI.
std::string meshFitText(const MeshFit& fit);

} // namespace tp
