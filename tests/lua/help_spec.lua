-- lt.help and its docs (lua/lt/help/): every public name has an entry,
-- every entry names something that exists, docs/API.md is what the generator
-- writes now, every example compiles and runs, and lt.help finds the doc of
-- an object, a class, an instance, a namespace or a name (with "did you mean"
-- for a misspelt one).
local lt = require "lt"
local help = require "lt.help"
local walk = require "lt.help.walk"
local internal = require "lt.help.internal"

-- Every entry of the data, and each name (or alias) an entry goes by.
local function documented()
  local names, entries = {}, {}
  for _, area in ipairs(help.areas()) do
    for _, e in ipairs(area.entries) do
      entries[#entries + 1] = e
      names[e.name] = e
      for _, alias in ipairs(e.aliases or {}) do names[alias] = e end
    end
  end
  return names, entries
end

-- lt.help's output (it prints and returns nothing), and its results.
local function printed(...)
  local path = os.tmpname()
  local file = assert(io.open(path, "w"))
  io.output(file)
  local results = table.pack(pcall(lt.help, ...))
  io.output(io.stdout)
  file:close()
  local text = assert(io.open(path)):read("a")
  os.remove(path)
  assert(results[1], results[2])
  return text, results.n - 1
end

local function contains(text, part)
  assert(text and text:find(part, 1, true), string.format("%q does not contain %q", tostring(text), part))
end

describe("lt.help's docs", function()
  it("have an entry for every public name (or list it in lt.help.internal with a reason)", function()
    local names = documented()
    local missing = {}
    for _, r in ipairs(walk.names(lt, { lazy = true })) do
      if not names[r.name] and not internal[r.name] then missing[#missing + 1] = r.name .. " (" .. r.kind .. ")" end
    end
    assert(#missing == 0, #missing .. " public names have no doc entry in lua/lt/help/:\n  "
      .. table.concat(missing, "\n  "))
  end)

  it("name only what exists, each name in one entry", function()
    local public = {}
    for _, r in ipairs(walk.names(lt, { lazy = true })) do public[r.name] = true end
    local problems, seen = {}, {}
    for _, e in ipairs(select(2, documented())) do
      for _, name in ipairs { e.name, table.unpack(e.aliases or {}) } do
        if seen[name] then problems[#problems + 1] = name .. ": in two entries" end
        seen[name] = true
        if not e.virtual and not public[name] then problems[#problems + 1] = name .. ": no such public name" end
        if internal[name] then problems[#problems + 1] = name .. ": documented and listed as internal" end
      end
      for _, s in ipairs(e.see or {}) do
        if #help.lookup(s) == 0 then problems[#problems + 1] = e.name .. " refers to " .. s .. ", which has no entry" end
      end
    end
    assert(#problems == 0, table.concat(problems, "\n"))
  end)

  it("give each entry a signature, a description and an example", function()
    local problems = {}
    for _, e in ipairs(select(2, documented())) do
      for _, field in ipairs { "sig", "doc", "ex" } do
        if type(e[field]) ~= "string" or e[field] == "" then problems[#problems + 1] = e.name .. " has no " .. field end
      end
    end
    assert(#problems == 0, table.concat(problems, "\n"))
  end)

  it("are what docs/API.md holds (run `lt scripts/gen_api_doc.lua > docs/API.md` after a change)", function()
    local file = assert(io.open("docs/API.md", "rb"), "docs/API.md is missing: run lt scripts/gen_api_doc.lua > docs/API.md")
    local committed = file:read("a")
    file:close()
    local now = require("lt.help.markdown")()
    if committed ~= now then
      local line = 1
      for i = 1, math.min(#committed, #now) do
        if committed:byte(i) ~= now:byte(i) then break end
        if now:byte(i) == 10 then line = line + 1 end
      end
      error("docs/API.md is stale from line " .. line .. ": run lt scripts/gen_api_doc.lua > docs/API.md", 0)
    end
  end)

  it("have examples that compile and run after the setup docs/API.md shows", function()
    local setup = require "lt.help.setup"
    local sink = assert(io.open("/dev/null", "w"))
    local failures, ran = {}, 0
    for _, e in ipairs(select(2, documented())) do
      local env = setmetatable({ print = function() end }, { __index = _G })
      assert(load(setup, "=setup", "t", env))()
      local chunk, err = load(e.ex, "=" .. e.name, "t", env)
      if not chunk then
        failures[#failures + 1] = e.name .. " does not compile: " .. err
      elseif not e.run then -- run: why it is only compiled (a file, a GPU)
        local stdout = io.stdout -- progress bars write there
        io.output(sink)
        io.stdout = sink
        local ok, run_err = pcall(chunk)
        io.stdout = stdout
        io.output(stdout)
        if ok then ran = ran + 1 else failures[#failures + 1] = e.name .. " fails: " .. tostring(run_err) end
      end
    end
    sink:close()
    assert(#failures == 0, table.concat(failures, "\n"))
    assert(ran > 250, "only " .. ran .. " examples ran")
  end)
end)

describe("lt.help", function()
  it("prints the doc of a function and returns nothing", function()
    local text, nresults = printed(lt.randn)
    contains(text, "lt.randn(size..., {dtype=, device=, requires_grad=})")
    contains(text, "example: ")
    assert.equal(0, nresults)
    contains(printed(lt.nn.functional.relu), "F.relu(x, {inplace=false})")
    contains(printed(lt.Tensor.sum), "t:sum([dims] [, keepdim])")
    contains(printed(lt.matmul), "lt.matmul(a, b)") -- one function, two names, one entry
  end)

  it("prints a class's doc for the class and for an instance", function()
    contains(printed(lt.nn.Linear), "nn.Linear(in_features, out_features")
    contains(printed(lt.nn.Linear(2, 3)), "nn.Linear(in_features, out_features")
    local opt = lt.optim.Adam({ lt.zeros(2, { requires_grad = true }) })
    contains(printed(opt), "optim.Adam(params")
    contains(printed(lt.optim.lr_scheduler.StepLR(opt, { step_size = 1 })), "StepLR(opt, {step_size=")
    contains(printed(lt.amp.GradScaler()), "lt.amp.GradScaler(")
    contains(printed(lt.no_grad()), "lt.no_grad(fn, ...)")
    local Block = lt.nn.Module:extend("HelpSpecBlock")
    contains(printed(Block()), "HelpSpecBlock is a module class defined outside lt")
  end)

  it("prints the tensor overview for a tensor, and a namespace's entries for a namespace", function()
    local text = printed(lt.zeros(2))
    contains(text, "Fields: t.shape")
    contains(text, "index_select")
    text = printed(lt.nn)
    contains(text, "nn.Linear")
    contains(text, "nn.Sequential")
    contains(printed(lt.nn.functional), "F.cross_entropy")
    contains(printed(lt.memory), "lt.memory.max_allocated")
    contains(printed("lt.nn.functional"), "F.relu")
    contains(printed("lt.optim"), "optim.SGD")
  end)

  it("looks names up in the spellings people use", function()
    for name, sig in pairs {
      ["lt.nn.Linear"] = "nn.Linear(in_features", ["nn.Linear"] = "nn.Linear(in_features",
      ["Tensor:sum"] = "t:sum(", ["t:sum"] = "t:sum(", ["lt.Tensor.sum"] = "t:sum(", sum = "t:sum(",
      ["F.relu"] = "F.relu(x", ["lt.nn.functional.relu"] = "F.relu(x", ["torch.randn"] = "lt.randn(",
      ["nn.Module:parameters"] = "m:parameters(", ["lt.memory.stats"] = "lt.memory.stats(",
      ["optim.Adam"] = "optim.Adam(params", Reductions = "t:argmax",
    } do
      contains(printed(name), sig)
    end
    -- a bare name shared by several entries prints each
    local text = printed("relu")
    contains(text, "t:relu()")
    contains(text, "F.relu(x")
  end)

  it("describes what a global name holds, as ?model does at the REPL", function()
    rawset(_G, "help_spec_model", lt.nn.Sequential(lt.nn.Linear(2, 2)))
    contains(printed("help_spec_model"), "nn.Sequential(m1, m2, ...)")
    rawset(_G, "help_spec_model", nil)
  end)

  it("says which name was meant when it has no entry", function()
    assert.equal("lt.help: no entry for 'lt.nn.Lineer' (did you mean 'nn.Linear'?)\n", printed("lt.nn.Lineer"))
    assert.equal("lt.help: no entry for 't:sotr' (did you mean 't:sort'?)\n", printed("t:sotr"))
    assert.equal("lt.help: no entry for 'qwertyuiop'\n", printed("qwertyuiop"))
    local text, message = help.text("lt.zerso")
    assert.is_nil(text)
    assert.equal("lt.help: no entry for 'lt.zerso' (did you mean 'lt.zeros'?)", message)
  end)

  it("takes any value without failing", function()
    contains(printed(print), "not one of lt's")
    contains(printed(nil), "got nil")
    contains(printed(42), "no entry for this number")
    contains(printed({}), "no entry for this table")
    contains(printed(), "Reductions")
    contains(printed(lt), "Reductions")
  end)

  it("loads its docs on the first call, not with require \"lt\"", function()
    local interpreter = arg and arg[-1]
    if not interpreter then return pending("no interpreter path in arg[-1]") end
    local pipe = assert(io.popen(interpreter .. " -e 'require \"lt\"; print(package.loaded[\"lt.help\"] == nil, "
      .. "package.loaded[\"lt.help.tensor\"] == nil)' 2>&1"))
    local out = pipe:read("a")
    pipe:close()
    assert.equal("true\ttrue\n", out)
  end)
end)
