-- lt.help: the layers, containers and losses (lua/lt/nn/*.lua).
local FACTORY = "dtype=\"float32\" and device=\"cpu\" (where the parameters are made)"

return {
  title = "Layers, containers and losses",
  intro = "PyTorch's modules with their defaults, initialisation and parameter names; options are a "
    .. "table after the positional arguments and unknown options are errors with a suggestion. "
    .. "A layer's forward is its nn.functional op.",
  entries = {
    { "nn.Linear", "nn.Linear(in_features, out_features, {bias=true, dtype=, device=})",
      "y = x W^T + b over the last dimension of x. Parameters: weight [out_features, in_features] and "
        .. "bias [out_features], initialised as PyTorch's (uniform in +-1/sqrt(in_features)).",
      opts = "bias=true, " .. FACTORY, ex = "local fc = nn.Linear(784, 128); local h = nn.Linear(4, 2)(x)",
      see = { "F.linear", "m:reset_parameters" } },
    { "nn.Identity", "nn.Identity(...)", "Returns its input; constructor arguments are ignored, as PyTorch's.",
      ex = "local same = nn.Identity()(x)" },
    { "nn.Conv2d",
      "nn.Conv2d(in_channels, out_channels, kernel_size, {stride=1, padding=0, dilation=1, groups=1, "
        .. "bias=true, dtype=, device=})",
      "A 2-D convolution over [N, C, H, W] input. Sizes are an integer or a pair {h, w}; padding may also "
        .. "be \"valid\" (none) or \"same\" (output as large as the input, stride 1). Parameters: weight "
        .. "[out_channels, in_channels / groups, kh, kw] and bias [out_channels]. Options are checked when "
        .. "the module is made.",
      opts = "stride=1, padding=0, dilation=1, groups=1, bias=true, " .. FACTORY,
      ex = "local conv = nn.Conv2d(1, 8, 3, {padding = \"same\"}); local fmap = conv(lt.randn(2, 1, 28, 28))",
      see = { "F.conv2d" } },
    { "m:reset_parameters", "m:reset_parameters()",
      "Initialises the parameters again as the layer's constructor did (nn.Linear, nn.Conv2d: PyTorch's "
        .. "kaiming-uniform default; nn.Embedding: N(0, 1), the padding row 0).",
      ex = "m:reset_parameters()", see = { "nn.init.default_layer_" } },
    { "nn.BatchNorm2d",
      "nn.BatchNorm2d(num_features, {eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, "
        .. "dtype=, device=})",
      "Batch normalisation over the channels of [N, C, H, W] input: batch statistics in training (and the "
        .. "running estimates updated), the running ones in eval mode. momentum=false averages cumulatively "
        .. "(PyTorch's None). Parameters weight (1) and bias (0) [C]; buffers running_mean, running_var and "
        .. "num_batches_tracked.",
      opts = "eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, " .. FACTORY,
      ex = "local bn = nn.BatchNorm2d(8); local normed = bn(lt.randn(2, 8, 5, 5))",
      see = { "nn.BatchNorm1d", "F.batch_norm" } },
    { "nn.BatchNorm1d",
      "nn.BatchNorm1d(num_features, {eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, "
        .. "dtype=, device=})",
      "nn.BatchNorm2d for [N, C] or [N, C, L] input.",
      opts = "eps=1e-5, momentum=0.1, affine=true, track_running_stats=true, " .. FACTORY,
      ex = "local bn = nn.BatchNorm1d(4); local normed = bn(x)" },
    { "m:reset_running_stats", "m:reset_running_stats()",
      "Batch norm: running_mean back to 0, running_var to 1, num_batches_tracked to 0.",
      ex = "nn.BatchNorm1d(4):reset_running_stats()" },
    { "nn.LayerNorm", "nn.LayerNorm(normalized_shape, {eps=1e-5, elementwise_affine=true, bias=true, dtype=, device=})",
      "Normalises over the trailing dimensions given by normalized_shape (an integer or a list of sizes). "
        .. "Parameters weight (1) and bias (0) of that shape.",
      opts = "eps=1e-5, elementwise_affine=true, bias=true, " .. FACTORY,
      ex = "local ln = nn.LayerNorm(4); local normed = ln(x)", see = { "F.layer_norm" } },
    { "nn.ReLU", "nn.ReLU({inplace=false})",
      "max(x, 0). With inplace=true it overwrites its input and returns it (no output tensor).",
      opts = "inplace=false", ex = "local act = nn.ReLU({inplace = true})", see = { "F.relu" } },
    { "nn.GELU", "nn.GELU({approximate=\"none\"})",
      "x * Phi(x), the Gaussian error linear unit; approximate=\"tanh\" uses the tanh approximation.",
      opts = "approximate=\"none\" (or \"tanh\")", ex = "local act = nn.GELU({approximate = \"tanh\"})",
      see = { "F.gelu" } },
    { "nn.Tanh", "nn.Tanh()", "The hyperbolic tangent.", ex = "local out = nn.Tanh()(x)" },
    { "nn.Sigmoid", "nn.Sigmoid()", "1 / (1 + exp(-x)).", ex = "local out = nn.Sigmoid()(x)" },
    { "nn.MaxPool2d", "nn.MaxPool2d(kernel_size, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false})",
      "The largest value of each window of [N, C, H, W] input; sizes an integer or a pair {h, w}.",
      opts = "stride=kernel_size, padding=0, dilation=1, ceil_mode=false",
      ex = "local pool = nn.MaxPool2d(2); local half = pool(lt.randn(1, 1, 4, 4))", see = { "F.max_pool2d" } },
    { "nn.AvgPool2d",
      "nn.AvgPool2d(kernel_size, {stride=kernel_size, padding=0, ceil_mode=false, "
        .. "count_include_pad=true})",
      "The mean of each window of [N, C, H, W] input.",
      opts = "stride=kernel_size, padding=0, ceil_mode=false, count_include_pad=true",
      ex = "local pool = nn.AvgPool2d(2); local half = pool(lt.randn(1, 1, 4, 4))", see = { "F.avg_pool2d" } },
    { "nn.AdaptiveAvgPool2d", "nn.AdaptiveAvgPool2d(output_size)",
      "F.adaptive_avg_pool2d as a module: averages [C, H, W] or [N, C, H, W] input into output_size cells "
        .. "(an integer, or {h, w} where false keeps that input size); 1 is a global average pool.",
      ex = "local gap = nn.AdaptiveAvgPool2d(1); local pooled = gap(lt.randn(2, 8, 7, 7))",
      see = { "F.adaptive_avg_pool2d" } },
    { "nn.Dropout", "nn.Dropout(p=0.5, {inplace=false}) / nn.Dropout({p=, inplace=})",
      "In training, zeroes each element with probability p and scales the rest by 1/(1-p); the identity "
        .. "in eval mode. In place it writes its input (the mask is still kept for backward).",
      opts = "p=0.5, inplace=false", ex = "local drop = nn.Dropout(0.1)", see = { "F.dropout" } },
    { "nn.Flatten", "nn.Flatten({start_dim=2, end_dim=-1})",
      "Flattens dimensions start_dim..end_dim (1-based: the default keeps the batch dimension, PyTorch's "
        .. "start_dim=1).",
      opts = "start_dim=2, end_dim=-1", ex = "local flat = nn.Flatten()(lt.randn(2, 1, 28, 28))",
      see = { "t:flatten" } },
    { "nn.Embedding", "nn.Embedding(num_embeddings, embedding_dim, {padding_idx=, dtype=, device=})",
      "A lookup table: indices (int64, 1-based) pick rows of weight [num_embeddings, embedding_dim], "
        .. "initialised N(0, 1). padding_idx (1-based, or negative from the end) names a row that starts "
        .. "at zero and gets no gradient.",
      opts = "padding_idx (none), " .. FACTORY,
      ex = "local emb = nn.Embedding(100, 8, {padding_idx = 1}); local vecs = emb(lt.tensor({{2, 5, 1}}))",
      see = { "F.embedding", "lt.text" } },
    { "nn.MultiheadAttention",
      "nn.MultiheadAttention(embed_dim, num_heads, {dropout=0, bias=true, add_bias_kv=false, "
        .. "add_zero_attn=false, kdim=, vdim=, batch_first=false, dtype=, device=})",
      "PyTorch's multi-head attention: mha(query, key, value, {key_padding_mask=, need_weights=true, "
        .. "attn_mask=, average_attn_weights=true, is_causal=false}) returns the output and (with "
        .. "need_weights) the attention weights, averaged over the heads unless average_attn_weights is false. "
        .. "query [L, N, E] (batch_first: [N, L, E]; unbatched [L, E]), key [S, N, kdim], value [S, N, vdim]. "
        .. "Masks as PyTorch's module takes them: a bool key_padding_mask [N, S] or attn_mask [L, S] / "
        .. "[N * num_heads, L, S] is true where a query must not attend; a floating one is added. With "
        .. "need_weights=false the heads go through F.scaled_dot_product_attention and the L x S matrix is "
        .. "never stored. Parameters: in_proj_weight [3E, E] (q_proj_weight, k_proj_weight, v_proj_weight "
        .. "when kdim or vdim differ from E), in_proj_bias [3E], out_proj.weight, out_proj.bias, and "
        .. "bias_k, bias_v with add_bias_kv, initialised as PyTorch's.",
      opts = "dropout=0, bias=true, add_bias_kv=false, add_zero_attn=false, kdim=embed_dim, vdim=embed_dim, "
        .. "batch_first=false, " .. FACTORY,
      ex = "local mha = nn.MultiheadAttention(8, 2, {batch_first = true}); local seq = lt.randn(2, 5, 8)\n"
        .. "local out, weights = mha(seq, seq, seq, {need_weights = false})",
      see = { "F.scaled_dot_product_attention" } },
    { "nn.Sequential", "nn.Sequential(m1, m2, ...) / nn.Sequential({m1, m2, ...})",
      "Chains modules: each one's output is the next one's input. seq[1] is the first child (named \"0\" "
        .. "in state_dict, as PyTorch's), #seq the number of children. Intermediate results of lt's "
        .. "layers are freed as soon as the next layer has used them.",
      ex = "local mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)); local out = mlp(x)",
      see = { "m:append", "nn.ModuleList", "nn.checkpoint_sequential" } },
    { "nn.ModuleList", "nn.ModuleList(m1, m2, ...) / nn.ModuleList({...})",
      "Holds modules for a forward of your own (it has none): list[i], #list, ipairs, append. Children "
        .. "are named from 0, as PyTorch's.",
      ex = "local layers = nn.ModuleList({nn.Linear(4, 4), nn.Linear(4, 4)}); local h = x\n"
        .. "for _, layer in ipairs(layers) do h = layer(h) end" },
    { "m:append", "m:append(module)", "nn.Sequential and nn.ModuleList: adds module at the end; returns the container.",
      ex = "local grown = nn.Sequential(nn.Linear(4, 4)):append(nn.ReLU())" },
    { "nn.CrossEntropyLoss", "nn.CrossEntropyLoss({weight=, reduction=\"mean\", ignore_index=-100, label_smoothing=0})",
      "F.cross_entropy as a module: loss(logits, target) with 1-based class labels, or class probabilities "
        .. "of the logits' shape. weight (a tensor of class weights) is a buffer.",
      opts = "weight (none), reduction=\"mean\" (\"sum\", \"none\"), ignore_index=-100, label_smoothing=0",
      ex = "local criterion = nn.CrossEntropyLoss(); local l = criterion(model(x), y)",
      see = { "F.cross_entropy" } },
    { "nn.MSELoss", "nn.MSELoss({reduction=\"mean\"})", "F.mse_loss as a module: loss(input, target).",
      opts = "reduction=\"mean\" (\"sum\", \"none\")",
      ex = "local l = nn.MSELoss()(m(x), lt.zeros(8, 3))", see = { "F.mse_loss" } },
  },
}
