-- The shell of lt's self-contained HTML pages (lt.memory.report and lt.plot):
-- the document around a page's body and the style both start from (page,
-- headings, cards, panels), each page adding its own rules after it.
local page = {}

page.base_css = [[
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1f2328;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 22px; margin: 0 0 2px; font-weight: 650; }
h2 { font-size: 16px; margin: 0 0 12px; font-weight: 600; }
.subtitle { color: #656d76; margin: 0 0 18px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px; margin-bottom: 18px; }
.card, .panel { background: #fff; border: 1px solid #d8dee4; border-radius: 8px; }
.card { padding: 10px 14px; }
.card .label { color: #656d76; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 20px; font-weight: 600; font-variant-numeric: tabular-nums; }
]]

-- The whole document: title (already escaped), the page's own style after
-- the base one, and the body's HTML (inside <main> unless after_main is the
-- part that goes after it, such as a script).
function page.document(title, css, main, after_main)
  return table.concat({
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
    "<title>", title, "</title>\n<style>", page.base_css, css, "</style>\n</head>\n<body>\n<main>\n",
    main, "\n</main>\n", after_main or "", "\n</body>\n</html>\n",
  })
end

return page
