#pragma once
// Hugging Face config.json -> our model config (the keys of resources/models/*.json).
#include <string>

#include "../models/models.h"

namespace tp {

/// Maps a Hugging Face config (model_type gpt2, opt, llama, mistral, bert, t5, vit, ...) onto
/// a builder config. Throws InputError naming `origin` and the field at fault; an unknown
/// architecture names the model_type and lists the supported ones.
ModelConfig modelConfigFromHuggingFace(const std::string& text, const std::string& origin);

} // namespace tp
