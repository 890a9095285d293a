#include "common/message_text.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace gpemu {
namespace {

// N12: names other processes chose are printed in tables; none of their bytes
// may reach the terminal as a control.
TEST(TerminalText, ControlCharactersAreEscapedAndTextIsKept) {
  EXPECT_EQ(terminal_text("\x1b]0;owned\x07\x1b[2J\r\nGPU  0"), "\\x1b]0;owned\\x07\\x1b[2J\\r\\nGPU  0");
  EXPECT_EQ(terminal_text(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(terminal_text("\xc2\x9b"
                          "2J"),
            "\\u009b2J")
      << "C1 CSI as UTF-8";
  EXPECT_EQ(terminal_text("\x9b"
                          "2J"),
            "\\x9b2J")
      << "a lone C1 byte, CSI to an 8-bit terminal";
  EXPECT_EQ(terminal_text("résumé €5 日本 \xf0\x9f\x99\x82"), "résumé €5 日本 \xf0\x9f\x99\x82")
      << "UTF-8 is kept, continuation bytes 0x80-0x9f included";
  EXPECT_EQ(terminal_text("\xe0\x82\x9b"), "\xe0\\x82\\x9b") << "an overlong form is no character";
  EXPECT_EQ(terminal_text(std::string(300, 'x')), std::string(300, 'x')) << "never cut";
}

TEST(TerminalText, ControlCharactersAreFound) {
  EXPECT_FALSE(has_control_characters("train.py (rank 0) résumé €"));
  for (const std::string& s : std::initializer_list<std::string>{"\x1b[31m", "tab\there", "nl\n",
                                                                 std::string("nul\0", 4), "\x7f", "\xc2\x85", "\x9b"})
    EXPECT_TRUE(has_control_characters(s)) << terminal_text(s);
}

TEST(TerminalText, MessagesStayCutAndOneLine) {
  EXPECT_EQ(one_line_message("a\nb"), "a\\nb");
  EXPECT_EQ(printable_excerpt("abcdef", 3), "abc... (6 bytes in all)");
}

}  // namespace
}  // namespace gpemu
