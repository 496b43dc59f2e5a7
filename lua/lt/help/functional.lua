-- lt.help: lt.nn.functional (bindings/nn.c, lua/lt/nn/functional.lua, lua/lt/nn/pad.lua,
-- lua/lt/tensor_ops.lua).
local REDUCTION = "reduction=\"mean\" (\"sum\", or \"none\" for one loss per sample)"

return {
  title = "nn.functional (F)",
  intro = "The nn ops as functions (local F = lt.nn.functional), with PyTorch's signatures adapted to "
    .. "Lua: keyword arguments are an options table, dimensions, class labels and indices count from 1. "
    .. "Most are the C functions themselves, so a training step pays no Lua wrapper per op.",
  entries = {
    { "F",
      "lt.nn.functional (local F = lt.nn.functional)", "The functional forms of the layers, "
        .. "activations and losses.",
      ex = "local F = lt.nn.functional; local out = F.relu(F.linear(x, m.weight, m.bias))",
      members = "F." },
    { "F.linear", "F.linear(x, weight [, bias])", "x W^T + b over the last dimension (weight [out, in]).",
      ex = "local h = F.linear(x, m.weight, m.bias)", see = { "nn.Linear" } },
    { "F.conv2d", "F.conv2d(x, weight [, bias], {stride=1, padding=0, dilation=1, groups=1})",
      "2-D convolution of [N, C, H, W] input with weight [out, C / groups, kh, kw]. Sizes are an integer "
        .. "or a pair {h, w}; padding may be \"valid\" (0) or \"same\" (output as large as the input, "
        .. "stride 1).",
      opts = "stride=1, padding=0, dilation=1, groups=1",
      ex = "local fmap = F.conv2d(lt.randn(1, 3, 8, 8), lt.randn(4, 3, 3, 3), nil, {padding = 1})",
      see = { "nn.Conv2d" } },
    { "F.pad", "F.pad(x, {before, after, ...}, {mode=\"constant\", value=0})",
      "Pads with value: pairs of (before, after) counts from the last dimension backwards, as torch's "
        .. "F.pad ({left, right, top, bottom} for an image); a negative count crops.",
      opts = "mode=\"constant\" (the only one), value=0",
      ex = "local padded = F.pad(lt.ones(2, 2), {1, 1, 0, 2}, {value = -1})" },
    { "F.max_pool2d",
      "F.max_pool2d(x, kernel_size, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false, "
        .. "return_indices=false})",
      "The largest value of each window of [N, C, H, W] input. With return_indices, also each window's "
        .. "argmax as a 1-based position within its input plane.",
      opts = "stride=kernel_size, padding=0, dilation=1, ceil_mode=false, return_indices=false",
      ex = "local pooled, where_ = F.max_pool2d(lt.randn(1, 1, 4, 4), 2, {return_indices = true})",
      see = { "nn.MaxPool2d" } },
    { "F.avg_pool2d",
      "F.avg_pool2d(x, kernel_size, {stride=kernel_size, padding=0, ceil_mode=false, "
        .. "count_include_pad=true, divisor_override=})",
      "The mean of each window of [N, C, H, W] input.",
      opts = "stride=kernel_size, padding=0, ceil_mode=false, count_include_pad=true, divisor_override (none)",
      ex = "local pooled = F.avg_pool2d(lt.randn(1, 1, 4, 4), 2)", see = { "nn.AvgPool2d" } },
    { "F.adaptive_avg_pool2d", "F.adaptive_avg_pool2d(x, output_size)",
      "Averages [C, H, W] or [N, C, H, W] input into output_size cells (an integer, or {h, w} where false "
        .. "keeps that input size), each the mean of PyTorch's window (windows overlap when the size does "
        .. "not divide): output_size 1 is a global average pool.",
      ex = "local pooled = F.adaptive_avg_pool2d(lt.randn(2, 8, 7, 7), 1)", see = { "F.avg_pool2d" } },
    { "F.batch_norm",
      "F.batch_norm(x, running_mean, running_var [, weight, bias], {training=false, momentum=0.1, "
        .. "eps=1e-5})",
      "Batch normalisation over dimension 2 (channels): with training, by the batch's statistics (and the "
        .. "running ones, if given, updated with momentum); else by the running statistics.",
      opts = "training=false, momentum=0.1, eps=1e-5",
      ex = "local normed = F.batch_norm(x, nil, nil, nil, nil, {training = true})", see = { "nn.BatchNorm2d" } },
    { "F.layer_norm", "F.layer_norm(x, normalized_shape [, weight, bias], {eps=1e-5})",
      "Normalisation over the trailing dimensions normalized_shape (an integer or a list of sizes).",
      opts = "eps=1e-5", ex = "local normed = F.layer_norm(x, 4)", see = { "nn.LayerNorm" } },
    { "F.relu", "F.relu(x, {inplace=false})", "max(x, 0); in place, x itself is written and returned.",
      opts = "inplace=false", ex = "local r = F.relu(x)", see = { "nn.ReLU", "t:relu" } },
    { "F.gelu", "F.gelu(x, {approximate=\"none\"})",
      "The Gaussian error linear unit x * Phi(x); approximate=\"tanh\" uses the tanh approximation.",
      opts = "approximate=\"none\" (or \"tanh\")", ex = "local g = F.gelu(x, {approximate = \"tanh\"})",
      see = { "nn.GELU" } },
    { "F.tanh", "F.tanh(x)", "The hyperbolic tangent.", ex = "local th = F.tanh(x)" },
    { "F.sigmoid", "F.sigmoid(x)", "1 / (1 + exp(-x)).", ex = "local s = F.sigmoid(x)" },
    { "F.softmax", "F.softmax(x, d)",
      "exp(x) / sum(exp(x)) along dimension d (required), computed stably.",
      ex = "local probs = F.softmax(lt.randn(2, 5), 2)", see = { "F.log_softmax", "t:softmax" } },
    { "F.log_softmax", "F.log_softmax(x, d)", "log(softmax(x, d)), computed stably.",
      ex = "local logp = F.log_softmax(lt.randn(2, 5), -1)", see = { "F.nll_loss" } },
    { "F.flatten", "F.flatten(x, start_dim=1, end_dim=-1)", "torch.flatten: x:flatten(start_dim, end_dim).",
      ex = "local flat = F.flatten(lt.randn(2, 3, 4), 2)" },
    { "F.dropout", "F.dropout(x, p=0.5, training=true, inplace=false) / F.dropout(x, p, {training=, inplace=})",
      "Zeroes each element with probability p and scales the rest by 1/(1-p) when training; x itself "
        .. "otherwise. In place, x is written and returned.",
      opts = "training=true, inplace=false", ex = "local dropped = F.dropout(x, 0.2, {training = true})",
      see = { "nn.Dropout" } },
    { "F.embedding", "F.embedding(indices, weight, {padding_idx=})",
      "The rows of weight at the 1-based indices (int64, any shape): the result has indices' shape plus "
        .. "weight's second dimension. padding_idx's row gets no gradient.",
      opts = "padding_idx (none; 1-based, or negative from the end)",
      ex = "local vecs = F.embedding(lt.tensor({1, 3}), lt.randn(5, 2))", see = { "nn.Embedding" } },
    { "F.scaled_dot_product_attention",
      "F.scaled_dot_product_attention(q, k, v, {attn_mask=, dropout_p=0, is_causal=false, "
        .. "scale=1/sqrt(E)})",
      "softmax(q k^T * scale + mask) v with dropout on the probabilities, as torch's: q [..., L, E], k "
        .. "[..., S, E], v [..., S, Ev] give [..., L, Ev], the leading (batch, head) dimensions "
        .. "broadcast. Blockwise with an online softmax (FlashAttention), so the L x S matrix is never "
        .. "stored, in forward or backward. A bool attn_mask is true where a query may attend (PyTorch's "
        .. "convention here; nn.MultiheadAttention's is the opposite), a floating one is added to the "
        .. "scores; is_causal is the lower triangle (query i sees keys 1..i) and excludes attn_mask. A "
        .. "query whose mask removes every key gets zeros.",
      opts = "attn_mask (none), dropout_p=0, is_causal=false, scale=1/sqrt(E)",
      ex = "local q = lt.randn(2, 4, 16, 8); local att = F.scaled_dot_product_attention(q, q, q, {is_causal = true})",
      see = { "nn.MultiheadAttention" } },
    { "F.cross_entropy",
      "F.cross_entropy(logits, target, {weight=, reduction=\"mean\", ignore_index=-100, "
        .. "label_smoothing=0})",
      "The cross-entropy of logits [N, C, ...] (log_softmax fused in) against target: 1-based class labels "
        .. "(int64, [N, ...]), or class probabilities of the logits' shape (floating). weight gives each "
        .. "class a weight; targets equal to ignore_index are skipped.",
      opts = "weight (none), " .. REDUCTION .. ", ignore_index=-100, label_smoothing=0",
      ex = "local loss = F.cross_entropy(model(x), y)", see = { "nn.CrossEntropyLoss", "F.nll_loss" } },
    { "F.nll_loss", "F.nll_loss(log_probs, target, {weight=, reduction=\"mean\", ignore_index=-100})",
      "The negative log-likelihood of 1-based class labels given log-probabilities [N, C, ...].",
      opts = "weight (none), " .. REDUCTION .. ", ignore_index=-100",
      ex = "local loss = F.nll_loss(F.log_softmax(model(x), 2), y)" },
    { "F.mse_loss", "F.mse_loss(input, target, {reduction=\"mean\"})", "The mean squared error.",
      opts = REDUCTION, ex = "local loss = F.mse_loss(m(x), lt.zeros(8, 3))", see = { "nn.MSELoss" } },
    { "F.normalize", "F.normalize(x, {p=2, dim=2, eps=1e-12})",
      "x / max(norm_p(x), eps) along dim (dim 1 for a 1-D x), as torch's F.normalize.",
      opts = "p=2, dim=2, eps=1e-12", ex = "local unit = F.normalize(x)", see = { "t:norm" } },
    { "F.cosine_similarity", "F.cosine_similarity(x1, x2, {dim=2, eps=1e-8})",
      "The cosine of the angle between x1 and x2 (broadcast) along dim (dim 1 for 1-D inputs), each norm "
        .. "kept from below eps.",
      opts = "dim=2, eps=1e-8", ex = "local sim = F.cosine_similarity(x, x)" },
  },
}
