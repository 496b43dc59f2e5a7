-- lt's namespaces (lua/lt/namespace.lua): a name that is no member is an error at the
-- user's line naming the closest member, as a tensor's unknown method is; optional keys
-- read as nil; and the members that load on first use are not loaded by require "lt".
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

describe("lt's namespaces", function()
  it("say which name is unknown and offer the closest member", function()
    local cases = {
      { function() return lt.zeross(3) end, "lt has no member 'zeross' (did you mean lt.zeros?)" },
      { function() return lt.nn.Lineer(3, 4) end, "lt.nn has no member 'Lineer' (did you mean lt.nn.Linear?)" },
      { function() return lt.nn.functional.gelu2 end,
        "lt.nn.functional has no member 'gelu2' (did you mean lt.nn.functional.gelu?)" },
      { function() return lt.optim.RMSprob end, "lt.optim has no member 'RMSprob' (did you mean lt.optim.RMSprop?)" },
      { function() return lt.memory.summry end, "lt.memory has no member 'summry' (did you mean lt.memory.summary?)" },
      { function() return lt.nn.Foo end, "lt.nn has no member 'Foo' (lt.help(lt.nn) lists them)" },
    }
    for _, c in ipairs(cases) do
      local err = h.fails_cleanly(c[1])
      assert.truthy(err:find(c[2], 1, true), err)
      assert.truthy(err:find("namespace_spec.lua:%d+:"), "the error is placed at the spec's line: " .. err)
    end
  end)

  it("read optional keys and rawget as nil, and take new members", function()
    assert.is_nil(lt.default_device) -- `lt --device` sets it
    assert.is_nil(rawget(lt.nn, "Lineer"))
    lt.nn.MyLayer = lt.nn.Linear
    assert.equal(lt.nn.Linear, lt.nn.MyLayer)
    lt.nn.MyLayer = nil
  end)

  it("load the lazy members on first use, not with require \"lt\"", function()
    local interpreter = arg and arg[-1]
    if not interpreter then return pending("no interpreter path in arg[-1]") end
    local modules = { "lt.optim.lr_scheduler", "lt.optim.rmsprop", "lt.optim.adagrad", "lt.optim.zero",
      "lt.nn.parallel", "lt.memory_summary", "lt.nn.conv", "lt.nn.pooling", "lt.nn.sparse", "lt.nn.attention",
      "lt.nn.checkpoint" }
    local probe = {}
    for _, m in ipairs(modules) do probe[#probe + 1] = ("package.loaded[%q] == nil"):format(m) end
    local pipe = assert(io.popen(interpreter .. " -e 'require \"lt\"; print(" .. table.concat(probe, ", ") .. ")' 2>&1"))
    local out = pipe:read("a")
    pipe:close()
    assert.equal(("true\t"):rep(#modules - 1) .. "true\n", out)
    assert.equal("table", type(lt.optim.lr_scheduler))
    assert.equal(lt.optim.lr_scheduler, package.loaded["lt.optim.lr_scheduler"])
    assert.equal("function", type(lt.memory.summary))
  end)

  it("name every class of the lazily loaded nn families, each marked as before", function()
    for _, family in ipairs { "conv", "pooling", "sparse", "attention", "checkpoint" } do
      for name, cls in pairs(require("lt.nn." .. family)) do
        assert.equal(cls, lt.nn[name], "lt.nn." .. name .. " is lt.nn." .. family .. "'s")
      end
    end
    -- nn.Sequential may release what these made once the next layer has used it
    for _, name in ipairs { "Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Embedding" } do
      assert.is_true(rawget(lt.nn[name], "_keeps_no_handles"), name .. " keeps no handles")
    end
  end)
end)
