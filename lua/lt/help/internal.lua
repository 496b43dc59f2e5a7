-- Public-looking names (no leading "_") that are not part of the API users
-- write against, each with the reason; tests/lua/help_spec.lua accepts them
-- without a doc entry. Keep this list short: a name users may call gets an
-- entry instead.
return {
  ["sched:closed_form"] = "hook of lr_scheduler.lua's private Scheduler base (a schedule's rate formula)",
  ["sched:check"] = "hook of the private Scheduler base (options checked together)",
  ["sched:init"] = "hook of the private Scheduler base (construction-only checks)",
  ["sched:attach"] = "hook of the private Scheduler base (what a schedule keeps in the groups)",
  ["sched:schedule"] = "hook of the private Scheduler base (the fields an epoch sets)",
  ["sched:after_apply"] = "hook of SequentialLR",
  ["sched:load_children"] = "helper of SequentialLR:load_state_dict",
  ["optim.lr_scheduler.LambdaLR.normalize"] = "helper of LambdaLR's constructor (its argument forms)",
  ["tok:assemble"] = "step of tok:encode (truncation and special tokens)",
  ["tok:encode_options"] = "step of tok:encode (its options checked)",
  ["tok:pad"] = "step of tok:encode (padding)",
  ["tok:word_ids"] = "step of tok:encode (one word's WordPiece ids)",
  ["F.check_conv2d"] = "the engine's option checks nn.Conv2d runs when made (F.conv2d checks at the call)",
  ["bar:line"] = "drawing helper of bar:refresh (the bar's text)",
  ["bar:postfix_text"] = "drawing helper of bar:refresh (the fields' text)",
  ["F.check_pool2d"] = "the engine's option checks nn.MaxPool2d / nn.AvgPool2d run when made",
}
