-- lt.help: nn.init and nn.utils (lua/lt/nn/initializers.lua, lua/lt/nn/utils.lua).
return {
  title = "nn.init and nn.utils",
  intro = "Weight initialisation as torch.nn.init (each fills its tensor in place without recording it "
    .. "in the graph, and returns it), and gradient clipping as torch.nn.utils.",
  entries = {
    { "nn.init", "lt.nn.init", "In-place weight initialisation, as torch.nn.init.",
      ex = "nn.init.xavier_uniform_(m.weight)", members = "nn.init." },
    { "nn.init.uniform_", "nn.init.uniform_(t, a=0, b=1)", "Fills t from the uniform distribution on [a, b).",
      ex = "nn.init.uniform_(m.bias, -0.1, 0.1)" },
    { "nn.init.normal_", "nn.init.normal_(t, mean=0, std=1)", "Fills t from N(mean, std^2).",
      ex = "nn.init.normal_(m.weight, 0, 0.02)" },
    { "nn.init.constant_", "nn.init.constant_(t, value)", "Fills t with value.", ex = "nn.init.constant_(m.bias, 0.1)" },
    { "nn.init.zeros_", "nn.init.zeros_(t)", "Fills t with 0.", ex = "nn.init.zeros_(m.bias)" },
    { "nn.init.ones_", "nn.init.ones_(t)", "Fills t with 1.", ex = "nn.init.ones_(m.bias)" },
    { "nn.init.kaiming_uniform_", "nn.init.kaiming_uniform_(t, {a=0, mode=\"fan_in\", nonlinearity=\"leaky_relu\"})",
      "He initialisation: uniform in +-gain * sqrt(3 / fan), fan being fan_in or fan_out and gain "
        .. "calculate_gain(nonlinearity, a).",
      opts = "a=0, mode=\"fan_in\" (or \"fan_out\"), nonlinearity=\"leaky_relu\"",
      ex = "nn.init.kaiming_uniform_(m.weight, {nonlinearity = \"relu\"})" },
    { "nn.init.kaiming_normal_", "nn.init.kaiming_normal_(t, {a=0, mode=\"fan_in\", nonlinearity=\"leaky_relu\"})",
      "He initialisation from N(0, (gain / sqrt(fan))^2).",
      opts = "a=0, mode=\"fan_in\" (or \"fan_out\"), nonlinearity=\"leaky_relu\"",
      ex = "nn.init.kaiming_normal_(m.weight, {mode = \"fan_out\", nonlinearity = \"relu\"})" },
    { "nn.init.xavier_uniform_", "nn.init.xavier_uniform_(t, gain=1)",
      "Glorot initialisation: uniform in +-gain * sqrt(6 / (fan_in + fan_out)).",
      ex = "nn.init.xavier_uniform_(m.weight)" },
    { "nn.init.xavier_normal_", "nn.init.xavier_normal_(t, gain=1)",
      "Glorot initialisation from N(0, (gain * sqrt(2 / (fan_in + fan_out)))^2).",
      ex = "nn.init.xavier_normal_(m.weight)" },
    { "nn.init.calculate_gain", "nn.init.calculate_gain(nonlinearity, param)",
      "PyTorch's recommended gain: 1 for linear, conv and sigmoid, 5/3 for tanh, sqrt(2) for relu, 3/4 "
        .. "for selu, sqrt(2 / (1 + slope^2)) for leaky_relu (param the slope, 0.01 by default).",
      ex = "local gain = nn.init.calculate_gain(\"relu\")" },
    { "nn.init.calculate_fan_in_and_fan_out", "nn.init.calculate_fan_in_and_fan_out(t) -> fan_in, fan_out",
      "shape[2] and shape[1] times the receptive field (the product of the sizes past the second), for a "
        .. "tensor of at least 2 dimensions.",
      ex = "local fan_in, fan_out = nn.init.calculate_fan_in_and_fan_out(m.weight)" },
    { "nn.init.default_layer_", "nn.init.default_layer_(weight [, bias])",
      "PyTorch's default for Linear and Conv layers: kaiming_uniform_ with a = sqrt(5) (bound "
        .. "1/sqrt(fan_in)) for the weight, and the bias uniform in the same bound.",
      ex = "nn.init.default_layer_(m.weight, m.bias)", see = { "m:reset_parameters" } },
    { "nn.utils", "lt.nn.utils", "Gradient clipping, as torch.nn.utils.",
      ex = "nn.utils.clip_grad_norm_(model:parameters(), 1.0)", members = "nn.utils." },
    { "nn.utils.clip_grad_norm_",
      "nn.utils.clip_grad_norm_(parameters, max_norm, {norm_type=2, error_if_nonfinite=false})",
      "Scales every gradient by max_norm / (total norm + 1e-6) when that is below 1, in place, and returns "
        .. "the total norm (of the gradients' norms) as a 0-dim tensor, with no wait for the device. "
        .. "parameters: a tensor or a list (m:parameters()); those without a gradient are skipped. With a "
        .. "GradScaler, call scaler:unscale_(opt) first.",
      opts = "norm_type=2 (any positive number, or math.huge), error_if_nonfinite=false",
      ex = "local norm = nn.utils.clip_grad_norm_(model:parameters(), 1.0)",
      see = { "nn.utils.clip_grad_value_", "scaler:unscale_" } },
    { "nn.utils.clip_grad_value_", "nn.utils.clip_grad_value_(parameters, clip_value)",
      "Clamps every gradient to [-clip_value, clip_value] in place.",
      ex = "nn.utils.clip_grad_value_(model:parameters(), 0.5)" },
  },
}
