-- lt.text.unicode: the character classes and mappings a BERT normalizer and
-- pre-tokenizer need, on code points (integers) from Lua 5.4's utf8 library.
--
-- Coverage, stated where it is short of full Unicode:
--   * punctuation (P*), nonspacing marks (Mn) and control characters (Cc, Cf, Co): all
--     code points, as tokenizers 0.23.3 classifies them (range tables below);
--   * NFD decomposition (for accent stripping) covers the precomposed letters of
--     Latin-1 Supplement, Latin Extended-A and -B, Latin Extended Additional (so
--     Vietnamese and Pinyin), Greek and Coptic, Cyrillic U+0400..U+045F, and Hangul
--     syllables (computed). Other precomposed characters (Cyrillic U+0460 and up,
--     Indic nukta letters, CJK compatibility ideographs, the Angstrom and Ohm signs,
--     ...) are kept as they are, where Unicode's NFD would decompose them;
--   * lower-casing covers ASCII, Latin-1 Supplement, Latin Extended-A and -B, Latin
--     Extended Additional, Greek and Coptic, Cyrillic and Cyrillic Supplement, Armenian
--     and fullwidth Latin; other capitals (Georgian, Cherokee, Glagolitic, ...) are kept.
local unicode = {}

local utf8_char, utf8_codes = utf8.char, utf8.codes
local concat = table.concat

-- ---- range tables ----------------------------------------------------------

-- True when cp falls in one of the sorted, disjoint ranges {lo1, hi1, lo2, hi2, ...}:
-- a binary search over the pairs.
local function in_ranges(ranges, cp)
  local lo, hi = 1, #ranges // 2
  while lo <= hi do
    local mid = (lo + hi) // 2
    if cp < ranges[2 * mid - 1] then
      hi = mid - 1
    elseif cp > ranges[2 * mid] then
      lo = mid + 1
    else
      return true
    end
  end
  return false
end

-- The tables below are sorted lo, hi pairs of code points, measured from Hugging
-- Face's tokenizers 0.23.3 one character at a time (tests/fixtures/
-- gen_tokenizer_fixture.py --tables prints them), because matching its ids is the
-- point: its Unicode tables predate Unicode 10, so these differ from Unicode 14's
-- categories for characters added or recategorised since (U+2E43.., U+166D, ...).
-- tests/lua/tokenizer_spec.lua compares them with the installed tokenizers' classes.

-- Punctuation, which BERT's pre-tokenizer splits off as words of their own: general
-- category P*, and the ASCII symbols $ + < = > ^ ` | ~ as well.
local PUNCTUATION = {
  0x0021, 0x002F, 0x003A, 0x0040, 0x005B, 0x0060, 0x007B, 0x007E, 0x00A1, 0x00A1, 0x00A7, 0x00A7,
  0x00AB, 0x00AB, 0x00B6, 0x00B7, 0x00BB, 0x00BB, 0x00BF, 0x00BF, 0x037E, 0x037E, 0x0387, 0x0387,
  0x055A, 0x055F, 0x0589, 0x058A, 0x05BE, 0x05BE, 0x05C0, 0x05C0, 0x05C3, 0x05C3, 0x05C6, 0x05C6,
  0x05F3, 0x05F4, 0x0609, 0x060A, 0x060C, 0x060D, 0x061B, 0x061B, 0x061E, 0x061F, 0x066A, 0x066D,
  0x06D4, 0x06D4, 0x0700, 0x070D, 0x07F7, 0x07F9, 0x0830, 0x083E, 0x085E, 0x085E, 0x0964, 0x0965,
  0x0970, 0x0970, 0x0AF0, 0x0AF0, 0x0DF4, 0x0DF4, 0x0E4F, 0x0E4F, 0x0E5A, 0x0E5B, 0x0F04, 0x0F12,
  0x0F14, 0x0F14, 0x0F3A, 0x0F3D, 0x0F85, 0x0F85, 0x0FD0, 0x0FD4, 0x0FD9, 0x0FDA, 0x104A, 0x104F,
  0x10FB, 0x10FB, 0x1360, 0x1368, 0x1400, 0x1400, 0x166D, 0x166E, 0x169B, 0x169C, 0x16EB, 0x16ED,
  0x1735, 0x1736, 0x17D4, 0x17D6, 0x17D8, 0x17DA, 0x1800, 0x180A, 0x1944, 0x1945, 0x1A1E, 0x1A1F,
  0x1AA0, 0x1AA6, 0x1AA8, 0x1AAD, 0x1B5A, 0x1B60, 0x1BFC, 0x1BFF, 0x1C3B, 0x1C3F, 0x1C7E, 0x1C7F,
  0x1CC0, 0x1CC7, 0x1CD3, 0x1CD3, 0x2010, 0x2027, 0x2030, 0x2043, 0x2045, 0x2051, 0x2053, 0x205E,
  0x207D, 0x207E, 0x208D, 0x208E, 0x2308, 0x230B, 0x2329, 0x232A, 0x2768, 0x2775, 0x27C5, 0x27C6,
  0x27E6, 0x27EF, 0x2983, 0x2998, 0x29D8, 0x29DB, 0x29FC, 0x29FD, 0x2CF9, 0x2CFC, 0x2CFE, 0x2CFF,
  0x2D70, 0x2D70, 0x2E00, 0x2E2E, 0x2E30, 0x2E42, 0x3001, 0x3003, 0x3008, 0x3011, 0x3014, 0x301F,
  0x3030, 0x3030, 0x303D, 0x303D, 0x30A0, 0x30A0, 0x30FB, 0x30FB, 0xA4FE, 0xA4FF, 0xA60D, 0xA60F,
  0xA673, 0xA673, 0xA67E, 0xA67E, 0xA6F2, 0xA6F7, 0xA874, 0xA877, 0xA8CE, 0xA8CF, 0xA8F8, 0xA8FA,
  0xA8FC, 0xA8FC, 0xA92E, 0xA92F, 0xA95F, 0xA95F, 0xA9C1, 0xA9CD, 0xA9DE, 0xA9DF, 0xAA5C, 0xAA5F,
  0xAADE, 0xAADF, 0xAAF0, 0xAAF1, 0xABEB, 0xABEB, 0xFD3E, 0xFD3F, 0xFE10, 0xFE19, 0xFE30, 0xFE52,
  0xFE54, 0xFE61, 0xFE63, 0xFE63, 0xFE68, 0xFE68, 0xFE6A, 0xFE6B, 0xFF01, 0xFF03, 0xFF05, 0xFF0A,
  0xFF0C, 0xFF0F, 0xFF1A, 0xFF1B, 0xFF1F, 0xFF20, 0xFF3B, 0xFF3D, 0xFF3F, 0xFF3F, 0xFF5B, 0xFF5B,
  0xFF5D, 0xFF5D, 0xFF5F, 0xFF65, 0x10100, 0x10102, 0x1039F, 0x1039F, 0x103D0, 0x103D0, 0x1056F, 0x1056F,
  0x10857, 0x10857, 0x1091F, 0x1091F, 0x1093F, 0x1093F, 0x10A50, 0x10A58, 0x10A7F, 0x10A7F, 0x10AF0, 0x10AF6,
  0x10B39, 0x10B3F, 0x10B99, 0x10B9C, 0x11047, 0x1104D, 0x110BB, 0x110BC, 0x110BE, 0x110C1, 0x11140, 0x11143,
  0x11174, 0x11175, 0x111C5, 0x111C9, 0x111CD, 0x111CD, 0x111DB, 0x111DB, 0x111DD, 0x111DF, 0x11238, 0x1123D,
  0x112A9, 0x112A9, 0x114C6, 0x114C6, 0x115C1, 0x115D7, 0x11641, 0x11643, 0x1173C, 0x1173E, 0x12470, 0x12474,
  0x16A6E, 0x16A6F, 0x16AF5, 0x16AF5, 0x16B37, 0x16B3B, 0x16B44, 0x16B44, 0x1BC9F, 0x1BC9F, 0x1DA87, 0x1DA8B,
}

-- Nonspacing marks (general category Mn), which accent stripping deletes.
local NONSPACING_MARK = {
  0x0300, 0x036F, 0x0483, 0x0487, 0x0591, 0x05BD, 0x05BF, 0x05BF, 0x05C1, 0x05C2, 0x05C4, 0x05C5,
  0x05C7, 0x05C7, 0x0610, 0x061A, 0x064B, 0x065F, 0x0670, 0x0670, 0x06D6, 0x06DC, 0x06DF, 0x06E4,
  0x06E7, 0x06E8, 0x06EA, 0x06ED, 0x0711, 0x0711, 0x0730, 0x074A, 0x07A6, 0x07B0, 0x07EB, 0x07F3,
  0x0816, 0x0819, 0x081B, 0x0823, 0x0825, 0x0827, 0x0829, 0x082D, 0x0859, 0x085B, 0x08E3, 0x0902,
  0x093A, 0x093A, 0x093C, 0x093C, 0x0941, 0x0948, 0x094D, 0x094D, 0x0951, 0x0957, 0x0962, 0x0963,
  0x0981, 0x0981, 0x09BC, 0x09BC, 0x09C1, 0x09C4, 0x09CD, 0x09CD, 0x09E2, 0x09E3, 0x0A01, 0x0A02,
  0x0A3C, 0x0A3C, 0x0A41, 0x0A42, 0x0A47, 0x0A48, 0x0A4B, 0x0A4D, 0x0A51, 0x0A51, 0x0A70, 0x0A71,
  0x0A75, 0x0A75, 0x0A81, 0x0A82, 0x0ABC, 0x0ABC, 0x0AC1, 0x0AC5, 0x0AC7, 0x0AC8, 0x0ACD, 0x0ACD,
  0x0AE2, 0x0AE3, 0x0B01, 0x0B01, 0x0B3C, 0x0B3C, 0x0B3F, 0x0B3F, 0x0B41, 0x0B44, 0x0B4D, 0x0B4D,
  0x0B56, 0x0B56, 0x0B62, 0x0B63, 0x0B82, 0x0B82, 0x0BC0, 0x0BC0, 0x0BCD, 0x0BCD, 0x0C00, 0x0C00,
  0x0C3E, 0x0C40, 0x0C46, 0x0C48, 0x0C4A, 0x0C4D, 0x0C55, 0x0C56, 0x0C62, 0x0C63, 0x0C81, 0x0C81,
  0x0CBC, 0x0CBC, 0x0CBF, 0x0CBF, 0x0CC6, 0x0CC6, 0x0CCC, 0x0CCD, 0x0CE2, 0x0CE3, 0x0D01, 0x0D01,
  0x0D41, 0x0D44, 0x0D4D, 0x0D4D, 0x0D62, 0x0D63, 0x0DCA, 0x0DCA, 0x0DD2, 0x0DD4, 0x0DD6, 0x0DD6,
  0x0E31, 0x0E31, 0x0E34, 0x0E3A, 0x0E47, 0x0E4E, 0x0EB1, 0x0EB1, 0x0EB4, 0x0EB9, 0x0EBB, 0x0EBC,
  0x0EC8, 0x0ECD, 0x0F18, 0x0F19, 0x0F35, 0x0F35, 0x0F37, 0x0F37, 0x0F39, 0x0F39, 0x0F71, 0x0F7E,
  0x0F80, 0x0F84, 0x0F86, 0x0F87, 0x0F8D, 0x0F97, 0x0F99, 0x0FBC, 0x0FC6, 0x0FC6, 0x102D, 0x1030,
  0x1032, 0x1037, 0x1039, 0x103A, 0x103D, 0x103E, 0x1058, 0x1059, 0x105E, 0x1060, 0x1071, 0x1074,
  0x1082, 0x1082, 0x1085, 0x1086, 0x108D, 0x108D, 0x109D, 0x109D, 0x135D, 0x135F, 0x1712, 0x1714,
  0x1732, 0x1734, 0x1752, 0x1753, 0x1772, 0x1773, 0x17B4, 0x17B5, 0x17B7, 0x17BD, 0x17C6, 0x17C6,
  0x17C9, 0x17D3, 0x17DD, 0x17DD, 0x180B, 0x180D, 0x18A9, 0x18A9, 0x1920, 0x1922, 0x1927, 0x1928,
  0x1932, 0x1932, 0x1939, 0x193B, 0x1A17, 0x1A18, 0x1A1B, 0x1A1B, 0x1A56, 0x1A56, 0x1A58, 0x1A5E,
  0x1A60, 0x1A60, 0x1A62, 0x1A62, 0x1A65, 0x1A6C, 0x1A73, 0x1A7C, 0x1A7F, 0x1A7F, 0x1AB0, 0x1ABD,
  0x1B00, 0x1B03, 0x1B34, 0x1B34, 0x1B36, 0x1B3A, 0x1B3C, 0x1B3C, 0x1B42, 0x1B42, 0x1B6B, 0x1B73,
  0x1B80, 0x1B81, 0x1BA2, 0x1BA5, 0x1BA8, 0x1BA9, 0x1BAB, 0x1BAD, 0x1BE6, 0x1BE6, 0x1BE8, 0x1BE9,
  0x1BED, 0x1BED, 0x1BEF, 0x1BF1, 0x1C2C, 0x1C33, 0x1C36, 0x1C37, 0x1CD0, 0x1CD2, 0x1CD4, 0x1CE0,
  0x1CE2, 0x1CE8, 0x1CED, 0x1CED, 0x1CF4, 0x1CF4, 0x1CF8, 0x1CF9, 0x1DC0, 0x1DF5, 0x1DFC, 0x1DFF,
  0x20D0, 0x20DC, 0x20E1, 0x20E1, 0x20E5, 0x20F0, 0x2CEF, 0x2CF1, 0x2D7F, 0x2D7F, 0x2DE0, 0x2DFF,
  0x302A, 0x302D, 0x3099, 0x309A, 0xA66F, 0xA66F, 0xA674, 0xA67D, 0xA69E, 0xA69F, 0xA6F0, 0xA6F1,
  0xA802, 0xA802, 0xA806, 0xA806, 0xA80B, 0xA80B, 0xA825, 0xA826, 0xA8C4, 0xA8C4, 0xA8E0, 0xA8F1,
  0xA926, 0xA92D, 0xA947, 0xA951, 0xA980, 0xA982, 0xA9B3, 0xA9B3, 0xA9B6, 0xA9B9, 0xA9BC, 0xA9BC,
  0xA9E5, 0xA9E5, 0xAA29, 0xAA2E, 0xAA31, 0xAA32, 0xAA35, 0xAA36, 0xAA43, 0xAA43, 0xAA4C, 0xAA4C,
  0xAA7C, 0xAA7C, 0xAAB0, 0xAAB0, 0xAAB2, 0xAAB4, 0xAAB7, 0xAAB8, 0xAABE, 0xAABF, 0xAAC1, 0xAAC1,
  0xAAEC, 0xAAED, 0xAAF6, 0xAAF6, 0xABE5, 0xABE5, 0xABE8, 0xABE8, 0xABED, 0xABED, 0xFB1E, 0xFB1E,
  0xFE00, 0xFE0F, 0xFE20, 0xFE2F, 0x101FD, 0x101FD, 0x102E0, 0x102E0, 0x10376, 0x1037A, 0x10A01, 0x10A03,
  0x10A05, 0x10A06, 0x10A0C, 0x10A0F, 0x10A38, 0x10A3A, 0x10A3F, 0x10A3F, 0x10AE5, 0x10AE6, 0x11001, 0x11001,
  0x11038, 0x11046, 0x1107F, 0x11081, 0x110B3, 0x110B6, 0x110B9, 0x110BA, 0x11100, 0x11102, 0x11127, 0x1112B,
  0x1112D, 0x11134, 0x11173, 0x11173, 0x11180, 0x11181, 0x111B6, 0x111BE, 0x111CA, 0x111CC, 0x1122F, 0x11231,
  0x11234, 0x11234, 0x11236, 0x11237, 0x112DF, 0x112DF, 0x112E3, 0x112EA, 0x11300, 0x11301, 0x1133C, 0x1133C,
  0x11340, 0x11340, 0x11366, 0x1136C, 0x11370, 0x11374, 0x114B3, 0x114B8, 0x114BA, 0x114BA, 0x114BF, 0x114C0,
  0x114C2, 0x114C3, 0x115B2, 0x115B5, 0x115BC, 0x115BD, 0x115BF, 0x115C0, 0x115DC, 0x115DD, 0x11633, 0x1163A,
  0x1163D, 0x1163D, 0x1163F, 0x11640, 0x116AB, 0x116AB, 0x116AD, 0x116AD, 0x116B0, 0x116B5, 0x116B7, 0x116B7,
  0x1171D, 0x1171F, 0x11722, 0x11725, 0x11727, 0x1172B, 0x16AF0, 0x16AF4, 0x16B30, 0x16B36, 0x16F8F, 0x16F92,
  0x1BC9D, 0x1BC9E, 0x1D167, 0x1D169, 0x1D17B, 0x1D182, 0x1D185, 0x1D18B, 0x1D1AA, 0x1D1AD, 0x1D242, 0x1D244,
  0x1DA00, 0x1DA36, 0x1DA3B, 0x1DA6C, 0x1DA75, 0x1DA75, 0x1DA84, 0x1DA84, 0x1DA9B, 0x1DA9F, 0x1DAA1, 0x1DAAF,
  0x1E8D0, 0x1E8D6, 0xE0100, 0xE01EF,
}

-- Control characters, which BERT's clean_text deletes: categories Cc (C0, DEL, C1;
-- not tab, newline and carriage return, which become spaces), Cf (soft hyphen,
-- zero-width joiners, bidi marks, BOM, ...) and Co (private use). Unassigned code
-- points are kept. NUL and U+FFFD are deleted too, by their own rule.
local OTHER = {
  0x0001, 0x0008, 0x000B, 0x000C, 0x000E, 0x001F, 0x007F, 0x009F, 0x00AD, 0x00AD, 0x0600, 0x0605,
  0x061C, 0x061C, 0x06DD, 0x06DD, 0x070F, 0x070F, 0x180E, 0x180E, 0x200B, 0x200F, 0x202A, 0x202E,
  0x2060, 0x2064, 0x2066, 0x206F, 0xE000, 0xF8FF, 0xFEFF, 0xFEFF, 0xFFF9, 0xFFFB, 0x110BD, 0x110BD,
  0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A, 0xE0001, 0xE0001, 0xE0020, 0xE007F, 0xF0000, 0xFFFFD, 0x100000, 0x10FFFD,
}

-- Code points BERT pads with spaces so that each becomes a word of its own: the CJK
-- Unified Ideographs blocks and compatibility ideographs, with tokenizers' bounds
-- (U+2B820..U+2B91F is left out, where Google's Python BERT includes it).
local CHINESE = {
  0x3400, 0x4DBF, 0x4E00, 0x9FFF, 0xF900, 0xFAFF, 0x20000, 0x2A6DF, 0x2A700, 0x2B81F, 0x2B920, 0x2CEAF,
  0x2F800, 0x2FA1F,
}

-- Unicode's White_Space property, as Rust's char::is_whitespace has it (BERT's
-- pre-tokenizer splits on these).
local WHITESPACE = {}
for _, cp in ipairs { 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F,
    0x205F, 0x3000 } do
  WHITESPACE[cp] = true
end
for cp = 0x2000, 0x200A do WHITESPACE[cp] = true end

-- ASCII punctuation: Rust's is_ascii_punctuation, which BERT adds to Unicode's P*
-- so that $ + < = > ^ ` | ~ (symbols to Unicode) split words as well.
local ASCII_PUNCTUATION = {}
for c in ("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"):gmatch(".") do ASCII_PUNCTUATION[c:byte()] = true end

-- The range tables themselves, for tests that compare them with tokenizers' classes.
unicode.ranges = { punctuation = PUNCTUATION, mark = NONSPACING_MARK, control = OTHER, chinese = CHINESE }

function unicode.is_punctuation(cp)
  if cp < 0x80 then return ASCII_PUNCTUATION[cp] == true end
  return in_ranges(PUNCTUATION, cp)
end
function unicode.is_whitespace(cp) return WHITESPACE[cp] == true end
function unicode.is_control(cp) return in_ranges(OTHER, cp) end
function unicode.is_chinese(cp) return in_ranges(CHINESE, cp) end
function unicode.is_nonspacing_mark(cp) return in_ranges(NONSPACING_MARK, cp) end

-- ---- canonical decomposition (NFD) ------------------------------------------

-- Each line: a combining mark, then pairs of (base letter, precomposed letter) that
-- decompose to base .. mark. Letters with two marks (Greek U+0390, U+03B0) follow.
local COMPOSED_WITH = {
  [0x0300] = "AÀaàEÈeèIÌiìOÒoòUÙuùЕЀеѐИЍиѝ", -- grave
  [0x0301] = "AÁaáEÉeéIÍiíOÓoóUÚuúYÝyýCĆcćLĹlĺNŃnńRŔrŕSŚsśZŹzź" ..
             "ΑΆΕΈΗΉΙΊΟΌΥΎΩΏαάεέηήιίοόυύωώГЃгѓКЌкќ", -- acute (Greek tonos decomposes to it)
  [0x0302] = "AÂaâEÊeêIÎiîOÔoôUÛuûCĈcĉGĜgĝHĤhĥJĴjĵSŜsŝWŴwŵYŶyŷ", -- circumflex
  [0x0303] = "AÃaãNÑnñOÕoõIĨiĩUŨuũ", -- tilde
  [0x0304] = "AĀaāEĒeēIĪiīOŌoōUŪuū", -- macron
  [0x0306] = "AĂaăEĔeĕGĞgğIĬiĭOŎoŏUŬuŭИЙийУЎуў", -- breve
  [0x0307] = "CĊcċEĖeėGĠgġIİZŻzż", -- dot above
  [0x0308] = "AÄaäEËeëIÏiïOÖoöUÜuüyÿYŸΙΪΥΫιϊυϋЕЁеёІЇії", -- diaeresis
  [0x030A] = "AÅaåUŮuů", -- ring above
  [0x030B] = "OŐoőUŰuű", -- double acute
  [0x030C] = "CČcčDĎdďEĚeěNŇnňRŘrřSŠsšTŤtťZŽzžLĽlľ", -- caron
  [0x0327] = "CÇcçGĢgģKĶkķLĻlļNŅnņRŖrŗSŞsşTŢtţ", -- cedilla
  [0x0328] = "AĄaąEĘeęIĮiįUŲuų", -- ogonek
}

-- Code point -> its NFD as a string, built from COMPOSED_WITH at load.
local NFD = {}
for mark, pairs_text in pairs(COMPOSED_WITH) do
  local chars = {}
  for _, cp in utf8_codes(pairs_text) do chars[#chars + 1] = cp end
  for i = 1, #chars, 2 do NFD[chars[i + 1]] = utf8_char(chars[i], mark) end
end
NFD[0x0390] = utf8_char(0x03B9, 0x0308, 0x0301) -- ΐ
NFD[0x03B0] = utf8_char(0x03C5, 0x0308, 0x0301) -- ΰ
NFD[0x0374] = utf8_char(0x02B9) -- Greek numeral sign: to the modifier prime
NFD[0x0385] = utf8_char(0x00A8, 0x0301) -- dialytika tonos
NFD[0x03D3] = utf8_char(0x03D2, 0x0301) -- upsilon with hook and acute
NFD[0x03D4] = utf8_char(0x03D2, 0x0308) -- upsilon with hook and diaeresis
NFD[0x037E] = ";" -- Greek question mark: a singleton decomposition to the semicolon
NFD[0x0387] = utf8_char(0x00B7) -- Greek ano teleia: to the middle dot

-- Latin Extended-B (Pinyin's tone letters, African orthographies) and Latin
-- Extended Additional (Vietnamese) have too many letters, too irregularly placed, to
-- spell out as above. Each string below lists, for consecutive code points from
-- first, what stripping accents leaves of each: its NFD with the marks deleted
-- (letters without a decomposition stand for themselves). Listed from Unicode 14.0's
-- decompositions; the fixture checks every one against tokenizers.
local STRIPPED_BLOCKS = {
  { first = 0x0180, chars = "ƀƁƂƃƄƅƆƇƈƉƊƋƌƍƎƏƐƑƒƓƔƕƖƗƘƙƚƛƜƝƞƟOoƢƣƤƥƦƧ" ..
    "ƨƩƪƫƬƭƮUuƱƲƳƴƵƶƷƸƹƺƻƼƽƾƿǀǁǂǃǄǅǆǇǈǉǊǋǌAaI" ..
    "iOoUuUuUuUuUuǝAaAaÆæǤǥGgKkOoOoƷʒjǱǲǳGgǶǷ" ..
    "NnAaÆæØøAaAaEeEeIiIiOoOoRrRrUuUuSsTtȜȝHh" ..
    "ȠȡȢȣȤȥAaEeOoOoOoOoYyȴȵȶȷȸȹȺȻȼȽȾȿɀɁɂɃɄɅɆɇ" ..
    "ɈɉɊɋɌɍɎɏ" },
  { first = 0x1E00, chars = "AaBbBbBbCcDdDdDdDdDdEeEeEeEeEeFfGgHhHhHh" ..
    "HhHhIiIiKkKkKkLlLlLlLlMmMmMmNnNnNnNnOoOo" ..
    "OoOoPpPpRrRrRrRrSsSsSsSsSsTtTtTtTtUuUuUu" ..
    "UuUuVvVvWwWwWwWwWwXxXxYyZzZzZzhtwyẚſẜẝẞẟ" ..
    "AaAaAaAaAaAaAaAaAaAaAaAaEeEeEeEeEeEeEeEe" ..
    "IiIiOoOoOoOoOoOoOoOoOoOoOoOoUuUuUuUuUuUu" ..
    "UuYyYyYyYyỺỻỼỽỾỿ" },
}

-- Hangul syllables decompose by arithmetic (Unicode 14.0, section 3.12).
local S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
local T_COUNT, N_COUNT, S_COUNT = 28, 588, 11172

local function hangul_jamo(cp)
  local index = cp - S_BASE
  local l, v, t = L_BASE + index // N_COUNT, V_BASE + (index % N_COUNT) // T_COUNT, T_BASE + index % T_COUNT
  if t == T_BASE then return utf8_char(l, v) end
  return utf8_char(l, v, t)
end

-- Code point -> what stripping its accents leaves, for every decomposable letter
-- above: the NFD without its nonspacing marks.
local STRIPPED = {}
for cp, nfd in pairs(NFD) do
  local kept = {}
  for _, c in utf8_codes(nfd) do
    if not in_ranges(NONSPACING_MARK, c) then kept[#kept + 1] = utf8_char(c) end
  end
  STRIPPED[cp] = concat(kept)
end
for _, block in ipairs(STRIPPED_BLOCKS) do
  local cp = block.first
  for _, c in utf8_codes(block.chars) do
    if c ~= cp then STRIPPED[cp] = utf8_char(c) end
    cp = cp + 1
  end
end

-- What BERT's strip_accents makes of cp: its NFD with the nonspacing marks deleted.
function unicode.strip_accents(cp)
  if in_ranges(NONSPACING_MARK, cp) then return "" end
  local stripped = STRIPPED[cp]
  if stripped then return stripped end
  if cp >= S_BASE and cp < S_BASE + S_COUNT then return hangul_jamo(cp) end
  return utf8_char(cp)
end

-- ---- lower case -------------------------------------------------------------

-- Code point -> the string of its lower case (Unicode's full mapping: one code
-- point except for U+0130, which lower-cases to i and a combining dot).
local LOWER = {}
local function lower_range(first, last, offset, step)
  for cp = first, last, step or 1 do LOWER[cp] = utf8_char(cp + offset) end
end
lower_range(0x41, 0x5A, 32)                  -- ASCII
lower_range(0xC0, 0xD6, 32)                  -- Latin-1 Supplement, but not U+00D7 (x)
lower_range(0xD8, 0xDE, 32)
lower_range(0x0100, 0x012E, 1, 2)            -- Latin Extended-A: capitals even ...
LOWER[0x0130] = "i\u{307}"
lower_range(0x0132, 0x0136, 1, 2)
lower_range(0x0139, 0x0147, 1, 2)            -- ... then odd ...
lower_range(0x014A, 0x0176, 1, 2)            -- ... even again ...
LOWER[0x0178] = utf8_char(0x00FF)
lower_range(0x0179, 0x017D, 1, 2)            -- ... and odd
-- Latin Extended-B, spelled as STRIPPED_BLOCKS are: the lower case of each code
-- point from U+0180 on (Unicode 14.0).
local LOWER_EXTENDED_B = "ƀɓƃƃƅƅɔƈƈɖɗƌƌƍǝəɛƒƒɠɣƕɩɨƙƙƚƛɯɲƞɵơơƣƣƥƥʀƨ" ..
  "ƨʃƪƫƭƭʈưưʊʋƴƴƶƶʒƹƹƺƻƽƽƾƿǀǁǂǃǆǆǆǉǉǉǌǌǌǎǎǐ" ..
  "ǐǒǒǔǔǖǖǘǘǚǚǜǜǝǟǟǡǡǣǣǥǥǧǧǩǩǫǫǭǭǯǯǰǳǳǳǵǵƕƿ" ..
  "ǹǹǻǻǽǽǿǿȁȁȃȃȅȅȇȇȉȉȋȋȍȍȏȏȑȑȓȓȕȕȗȗșșțțȝȝȟȟ" ..
  "ƞȡȣȣȥȥȧȧȩȩȫȫȭȭȯȯȱȱȳȳȴȵȶȷȸȹⱥȼȼƚⱦȿɀɂɂƀʉʌɇɇ" ..
  "ɉɉɋɋɍɍɏɏ"
do
  local cp = 0x0180
  for _, c in utf8_codes(LOWER_EXTENDED_B) do
    if c ~= cp then LOWER[cp] = utf8_char(c) end
    cp = cp + 1
  end
end
lower_range(0x1E00, 0x1E94, 1, 2)            -- Latin Extended Additional
LOWER[0x1E9E] = utf8_char(0x00DF)            -- capital sharp s
lower_range(0x1EA0, 0x1EFE, 1, 2)
LOWER[0x0386] = utf8_char(0x03AC)            -- Greek with tonos
lower_range(0x0388, 0x038A, 37)
LOWER[0x038C] = utf8_char(0x03CC)
lower_range(0x038E, 0x038F, 63)
lower_range(0x0391, 0x03A1, 32)              -- Greek (U+03A2 is unassigned)
lower_range(0x03A3, 0x03AB, 32)
lower_range(0x0370, 0x0372, 1, 2)            -- the rest of Greek and Coptic
LOWER[0x0376] = utf8_char(0x0377)
LOWER[0x037F] = utf8_char(0x03F3)
LOWER[0x03CF] = utf8_char(0x03D7)
lower_range(0x03D8, 0x03EE, 1, 2)
LOWER[0x03F4] = utf8_char(0x03B8)
LOWER[0x03F7] = utf8_char(0x03F8)
LOWER[0x03F9] = utf8_char(0x03F2)
LOWER[0x03FA] = utf8_char(0x03FB)
lower_range(0x03FD, 0x03FF, -130)
lower_range(0x0400, 0x040F, 80)              -- Cyrillic and its Supplement
lower_range(0x0410, 0x042F, 32)
lower_range(0x0460, 0x0480, 1, 2)
lower_range(0x048A, 0x04BE, 1, 2)
LOWER[0x04C0] = utf8_char(0x04CF)
lower_range(0x04C1, 0x04CD, 1, 2)
lower_range(0x04D0, 0x052E, 1, 2)
lower_range(0x0531, 0x0556, 48)              -- Armenian
lower_range(0xFF21, 0xFF3A, 32)              -- fullwidth Latin

function unicode.lower(cp) return LOWER[cp] or utf8_char(cp) end

-- ---- BERT's normalizer and pre-tokenizer ----------------------------------------

-- Memoised per-code-point results stop growing past this many entries, so that a
-- text using every code point costs time, not memory.
local MEMO_LIMIT = 20000

-- The string BERT's normalizer makes of one code point, in its order: clean (drop
-- controls, map whitespace to a space), pad CJK ideographs, strip accents, lower-case.
local function normalize_code_point(cfg, cp)
  if cfg.clean_text then
    if cp == 0 or cp == 0xFFFD or in_ranges(OTHER, cp) then return "" end
    if WHITESPACE[cp] then return " " end
  end
  if cfg.handle_chinese_chars and in_ranges(CHINESE, cp) then return " " .. utf8_char(cp) .. " " end
  local s = cfg.strip_accents and unicode.strip_accents(cp) or utf8_char(cp)
  if cfg.lowercase then
    if #s == 1 or utf8.len(s) == 1 then return LOWER[utf8.codepoint(s)] or s end
    local parts = {}
    for _, c in utf8_codes(s) do parts[#parts + 1] = LOWER[c] or utf8_char(c) end
    s = concat(parts)
  end
  return s
end

-- ASCII-only text needs none of the tables: the C library's gsub and lower do it.
local function normalize_ascii(cfg, text)
  if cfg.clean_text then
    text = text:gsub("[\0-\8\11\12\14-\31\127]", ""):gsub("[\t\n\r]", " ")
  end
  if cfg.lowercase then text = text:lower() end
  return text
end

--- A normalizer function(text) -> text for the flags of Hugging Face's BertNormalizer:
--- {clean_text =, handle_chinese_chars =, strip_accents =, lowercase =} (booleans).
--- The text must be valid UTF-8 (the caller checks).
function unicode.bert_normalizer(cfg)
  local memo, memo_size = {}, 0
  return function(text)
    if not text:find("[\128-\255]") then return normalize_ascii(cfg, text) end
    local out, n = {}, 0
    for _, cp in utf8_codes(text) do
      local s = memo[cp]
      if not s then
        s = normalize_code_point(cfg, cp)
        if memo_size < MEMO_LIMIT then memo[cp], memo_size = s, memo_size + 1 end
      end
      n = n + 1
      out[n] = s
    end
    return concat(out)
  end
end

-- Splits on Lua's %s and %p, which in ASCII are exactly White_Space (less the
-- \v\f that cleaning removed, which %s also matches) and ASCII punctuation.
local function pre_tokenize_ascii(text, words)
  local n = #words
  for word in text:gsub("%p", " %0 "):gmatch("%S+") do
    n = n + 1
    words[n] = word
  end
  return words
end

--- BERT's pre-tokenizer: text -> list of words, split on whitespace (dropped) and
--- on punctuation (each punctuation character a word of its own). Appends to words
--- when given.
function unicode.bert_pre_tokenize(text, words)
  words = words or {}
  if not text:find("[\128-\255]") then return pre_tokenize_ascii(text, words) end
  local n = #words
  local start -- byte where the current word began, nil between words
  for pos, cp in utf8_codes(text) do
    local space = WHITESPACE[cp]
    local punct = not space and unicode.is_punctuation(cp)
    if space or punct then
      if start then
        n = n + 1
        words[n] = text:sub(start, pos - 1)
        start = nil
      end
      if punct then
        n = n + 1
        words[n] = utf8_char(cp)
      end
    elseif not start then
      start = pos
    end
  end
  if start then words[n + 1] = text:sub(start) end
  return words
end

return unicode
