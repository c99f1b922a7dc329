// Vision Transformer (Dosovitskiy et al. 2021), torchvision layout: a strided Conv2d patch
// embedding with bias, a learned class token joined in front, learned position embeddings,
// pre-LayerNorm layers with biases, a final LayerNorm and a Linear head on the class token.
#include "../util/error.h"
#include "blocks.h"
#include "builder.h"
#include "models.h"

namespace tp {

Graph buildVit(const ModelConfig& c)
{
    const std::int64_t layers = configInt(c, "layers"), h = configInt(c, "hidden"), heads = configInt(c, "heads");
    const std::int64_t ffn = configInt(c, "ffn", 4 * h), image = configInt(c, "image", 224);
    const std::int64_t patch = configInt(c, "patch"), channels = configInt(c, "channels", 3);
    const std::int64_t classes = configInt(c, "classes", 1000), batch = configInt(c, "batch", 1);
    const bool dropout = configBool(c, "dropout", false);
    requireDivisible(c, "hidden", h, "heads", heads);
    requireDivisible(c, "image", image, "patch", patch);
    const std::int64_t grid = image / patch, patches = grid * grid, seq = patches + 1;

    GraphBuilder g(configString(c, "name", "vit"), configDType(c));
    TensorId images = g.input("images", {batch, channels, image, image}, g.dtype());
    TensorId x;
    {
        auto scope = g.scope("embed");
        TensorId conv = g.op(OpKind::Conv2d, "patch",
                             {images, g.weight("patch.weight", {h, channels, patch, patch}), g.weight("patch.bias", {h})},
                             {batch, h, grid, grid}, {}, {{"stride", patch}});
        TensorId flat = g.op(OpKind::Reshape, "flatten", {conv}, {batch, h, patches});
        TensorId tokens =
            g.op(OpKind::Transpose, "to_tokens", {flat}, {batch, patches, h}, {}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
        // The class token has no batch dim: '1' dims in the equation broadcast it.
        x = g.op(OpKind::Concat, "class_token", {g.weight("class_token", {1, 1, h}), tokens}, {batch, seq, h}, "11h,bth->bsh",
                 {{"axis", std::int64_t{1}}});
        x = g.binary(OpKind::Add, "position", x, g.weight("position.weight", {1, seq, h}));
        if (dropout) x = g.unary(OpKind::Dropout, "dropout", x);
    }
    AttentionSpec attn;
    attn.heads = heads;
    attn.dropout = dropout;
    FeedForwardSpec mlp;
    mlp.ffn = ffn;
    mlp.dropout = dropout;
    for (std::int64_t i = 0; i < layers; ++i) {
        auto scope = g.scope("layers." + std::to_string(i));
        x = g.binary(OpKind::Add, "residual1", x, attention(g, g.layerNorm("ln1", x), attn));
        x = g.binary(OpKind::Add, "residual2", x, feedForward(g, g.layerNorm("ln2", x), mlp));
    }
    {
        auto scope = g.scope("head");
        TensorId cls = firstToken(g, g.layerNorm("ln", x));
        g.markOutput(crossEntropy(g, g.linear("classifier", cls, h, classes, true)));
    }
    return g.take();
}

} // namespace tp
