-- lt.data.csv: numeric columns, a header, a label column of class names or
-- numbers, quoting and line endings, and errors that name the file, the line
-- and the column.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

-- Writes text to a file of the scratch directory; returns its path.
local function file(name, text)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

local IRIS = [[
sepal_length,sepal_width,species,petal_length
5.1,3.5,setosa,1.4
7.0,3.2,versicolor,4.7
6.3,3.3,virginica,6.0
4.9,3.0,setosa,1.4
]]

describe("lt.data.csv", function()
  it("reads features and maps a text label column to sorted classes 1..C", function()
    local x, y, classes, columns = lt.data.csv(file("iris.csv", IRIS), { label = "species" })
    assert.same({ 4, 3 }, x.shape)
    assert.equal("float32", x.dtype)
    h.near({ { 5.1, 3.5, 1.4 }, { 7.0, 3.2, 4.7 }, { 6.3, 3.3, 6.0 }, { 4.9, 3.0, 1.4 } }, x:totable())
    assert.equal("int64", y.dtype)
    assert.same({ 1, 2, 3, 1 }, y:totable())
    assert.same({ "setosa", "versicolor", "virginica" }, classes)
    assert.same({ "sepal_length", "sepal_width", "petal_length" }, columns)
  end)

  it("takes the label column by 1-based index, and keeps numeric labels as written", function()
    local path = file("digits.csv", "a,b,digit\n1,2,7\n3,4,0\n5,6,7\n")
    local x, y, classes = lt.data.csv(path, { label = 3 })
    assert.same({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, x:totable())
    assert.equal("int64", y.dtype)
    assert.same({ 7, 0, 7 }, y:totable())
    assert.is_nil(classes)
    local _, target = lt.data.csv(file("reg.csv", "a,target\n1,0.5\n2,-1e3\n"), { label = "target", dtype = "float64" })
    assert.equal("float64", target.dtype)
    assert.same({ 0.5, -1000 }, target:totable())
    local _, first = lt.data.csv(path, { label = 1 })
    assert.same({ 1, 3, 5 }, first:totable())
  end)

  it("reads every column as a feature without a label, with or without a header", function()
    local x, y, classes, columns = lt.data.csv(file("plain.csv", "1,2,3\n4,5,6\n"), { header = false })
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, x:totable())
    assert.is_nil(y)
    assert.is_nil(classes)
    assert.is_nil(columns)
    local _, labels = lt.data.csv(file("plain2.csv", "1,2,cat\n4,5,dog\n6,7,cat\n"), { header = false, label = 3 })
    assert.same({ 1, 2, 1 }, labels:totable())
    local empty = lt.data.csv(file("header_only.csv", "a,b\n"))
    assert.same({ 0, 2 }, empty.shape)
  end)

  it("handles delimiters, quotes, spaces, CRLF, a byte order mark and blank lines", function()
    local text = "\xEF\xBB\xBF" .. 'x; "y"; label\r\n' ..
      ' 1.5 ; "2" ; "big, ""red"" dog"\r\n' ..
      "\r\n" ..
      "-3;  4e-1 ;cat\r\n" ..
      "nan;inf;cat\n"
    local x, y, classes, columns = lt.data.csv(file("semi.csv", text), { delimiter = ";", label = "label" })
    assert.same({ "x", "y" }, columns)
    assert.same({ 3, 2 }, x.shape)
    local v = x:totable()
    assert.equal(1.5, v[1][1])
    assert.equal(2, v[1][2])
    assert.equal(-3, v[2][1])
    h.near(0.4, v[2][2])
    assert.is_true(v[3][1] ~= v[3][1])
    assert.equal(math.huge, v[3][2])
    assert.same({ 'big, "red" dog', "cat" }, classes)
    assert.same({ 1, 2, 2 }, y:totable())
  end)

  it("names the file, line and column of a cell that is not a number", function()
    local path = file("bad_cell.csv", "a,b,c\n1,2,3\n4,abc,6\n")
    h.fails_cleanly(function() return lt.data.csv(path) end,
      "csv: " .. path .. ":3: column 2 ('b'): 'abc' is not a number")
    local empty = file("empty_cell.csv", "1,,3\n")
    h.fails_cleanly(function() return lt.data.csv(empty, { header = false }) end,
      "csv: " .. empty .. ":1: column 2: empty cell, expected a number")
    local quoted = file("multiline.csv", 'a,label\n1,"two\nlines"\n2,x\nq,y\n')
    h.fails_cleanly(function() return lt.data.csv(quoted, { label = "label" }) end,
      "csv: " .. quoted .. ":5: column 1 ('a'): 'q' is not a number")
  end)

  it("names the line of a ragged row", function()
    local path = file("ragged.csv", "a,b,c\n1,2,3\n4,5\n")
    h.fails_cleanly(function() return lt.data.csv(path) end,
      "csv: " .. path .. ":3: 2 cells, expected 3 (as in the header on line 1)")
    local no_header = file("ragged2.csv", "1,2\n3,4,5\n")
    h.fails_cleanly(function() return lt.data.csv(no_header, { header = false }) end,
      "csv: " .. no_header .. ":2: 3 cells, expected 2 (as on line 1)")
  end)

  it("names a missing label column and lists the columns there are", function()
    local path = file("iris2.csv", IRIS)
    h.fails_cleanly(function() return lt.data.csv(path, { label = "class" }) end,
      "csv: " .. path .. ": no column 'class' in the header (columns: sepal_length, sepal_width, species, petal_length)")
    h.fails_cleanly(function() return lt.data.csv(path, { label = 9 }) end,
      "csv: " .. path .. ": label column 9, but line 1 has 4 columns")
    h.fails_cleanly(function() return lt.data.csv(path, { header = false, label = "species" }) end,
      "label 'species' names a column, but the file is read without a header")
    local blank = file("blank_label.csv", "a,l\n1,\n")
    h.fails_cleanly(function() return lt.data.csv(blank, { label = "l" }) end,
      "csv: " .. blank .. ":2: column 2 ('l'): empty label")
  end)

  it("refuses missing, empty and malformed files and bad options", function()
    h.fails_cleanly(function() return lt.data.csv(dir .. "/none.csv") end,
      "csv: cannot open " .. dir .. "/none.csv: No such file or directory")
    local empty = file("empty.csv", "\n\n")
    h.fails_cleanly(function() return lt.data.csv(empty) end, "csv: " .. empty .. " is empty")
    local open = file("open_quote.csv", 'a\n"1\n')
    h.fails_cleanly(function() return lt.data.csv(open) end,
      "csv: " .. open .. ":2: a quoted cell is not closed before the end of the file")
    local after = file("after_quote.csv", 'a,b\n"1"x,2\n')
    h.fails_cleanly(function() return lt.data.csv(after) end, "csv: " .. after .. ":2: column 1: text after the closing quote")
    h.fails_cleanly(function() return lt.data.csv(empty, { labels = "x" }) end, "csv: unknown option 'labels'")
    h.fails_cleanly(function() return lt.data.csv(empty, { delimiter = ",," }) end, "delimiter must be a one-character string")
    h.fails_cleanly(function() return lt.data.csv(empty, { dtype = "int64" }) end, "dtype must be \"float32\" or \"float64\"")
    h.fails_cleanly(function() return lt.data.csv(empty, { label = 0 }) end, "label must be a column name or a 1-based column index")
  end)

  it("reads a larger table", function()
    local rows = {}
    for i = 1, 20000 do rows[i] = string.format("%d,%g,%g,%g,%s", i, i * 0.5, -i, i / 7, i % 3 == 0 and "a" or "b") end
    local path = file("big.csv", "i,h,n,s,c\n" .. table.concat(rows, "\n") .. "\n")
    local x, y = lt.data.csv(path, { label = "c", dtype = "float64" })
    assert.same({ 20000, 4 }, x.shape)
    assert.equal(20000 * 20001 / 2, x:select(2, 1):sum():item())
    assert.equal(6666, y:eq(1):sum():item())
  end)
end)
