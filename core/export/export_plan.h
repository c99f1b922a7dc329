#pragma once
// Exports of a costed plan (a workspace and the search result on it), for people and programs.
// See docs/formats.md, "Exports". Every function is deterministic and throws InputError only for
// an unknown format name.
#include <string>
#include <vector>

#include "../layout/layout.h"
#include "../plan/planner.h"

namespace tp {

/// CSV: a per-op table (name, block, kind, strategy, output spec, seconds, memory by category),
/// a blank line, then a per-block-class table (totals over the instances of each class).
std::string exportCsv(const PlanWorkspace& workspace, const SearchResult& result);

/// The folded graph as a layout description: one cluster per block class ("layers.* x96") with
/// its representative's ops coloured by how they are sharded, edges labelled with the
/// collectives the plan puts there (AR, AG, RS, A2A), a legend and a title. The GUI can lay it
/// out itself with layoutGraph.
LayoutInput foldedPlanGraph(const PlanWorkspace& workspace, const SearchResult& result);

/// A PyTorch script: the DeviceMesh and a parallelize_module plan per block class, with a
/// comment per module naming the collective it implies; ops the DTensor styles cannot express
/// are listed at the top.
std::string exportPytorch(const PlanWorkspace& workspace, const SearchResult& result);

/// Megatron-LM arguments when the plan is Megatron-shaped, else a statement of what differs
/// followed by the closest arguments.
std::string exportMegatron(const PlanWorkspace& workspace, const SearchResult& result);

/// A Hugging Face base_model_tp_plan style JSON object, module pattern -> "colwise",
/// "colwise_rep" (column-parallel with a replicated output), "rowwise" or "sequence_parallel";
/// one entry per op of the folded block classes that maps onto a style.
std::string exportHfTpPlan(const PlanWorkspace& workspace, const SearchResult& result);

/// The export formats by name.
std::vector<std::string> exportFormats(); ///< csv, dot, svg, png, pytorch, megatron, hf-tp-plan
/// Any export by format name; images are rendered by Graphviz. Returns the file bytes.
std::string exportPlan(const PlanWorkspace& workspace, const SearchResult& result, const std::string& format);

} // namespace tp
