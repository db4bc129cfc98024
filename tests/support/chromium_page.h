// chromium_page.h — a page rendered by real headless Chromium (--dump-dom), for the tests of the pages
// opscope writes (the report, the ranks' view, opscope diff's page).
#pragma once

#include "subprocess.h"
#include "test_data.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace opscope_test {

// The DOM without the text of its <script> and <style> elements (the page's code and its embedded data), so
// that what tests find in it is what the page shows.
inline std::string withoutScriptsAndStyles(std::string dom) {
  for (const std::string tag : {"script", "style"}) {
    std::size_t at = 0;
    while ((at = dom.find("<" + tag, at)) != std::string::npos) {
      const std::size_t open_end = dom.find('>', at);
      const std::size_t close = dom.find("</" + tag + ">", open_end);
      if (open_end == std::string::npos || close == std::string::npos) break;
      dom.erase(open_end + 1, close - open_end - 1);
      at = open_end + 1;
    }
  }
  return dom;
}

// The page rendered by headless Chromium: the DOM after its scripts ran. A screenshot goes to `png` when
// given.
inline std::string renderInChromium(const std::filesystem::path& page,
                                    const std::filesystem::path& png = {}) {
  namespace fs = std::filesystem;
  const fs::path profile = tempDir("chromium_profile");
  std::vector<std::string> common = {CHROMIUM_PATH,
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-dev-shm-usage",  // containers often have a small /dev/shm
                                     "--disable-background-networking",
                                     "--disable-component-update",
                                     "--disable-sync",
                                     "--disable-default-apps",
                                     "--no-first-run",
                                     "--user-data-dir=" + profile.string()};
  std::vector<std::string> dump = common;
  dump.push_back("--dump-dom");
  dump.push_back("file://" + fs::absolute(page).string());
  const Run r = run(dump, {{"HOME", profile.string()}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (!png.empty()) {
    fs::create_directories(png.parent_path());
    std::vector<std::string> shot = common;
    shot.push_back("--screenshot=" + png.string());
    shot.push_back("--window-size=1280,2400");
    shot.push_back("--hide-scrollbars");
    shot.push_back("file://" + fs::absolute(page).string());
    const Run s = run(shot, {{"HOME", profile.string()}});
    EXPECT_EQ(s.exit_code, 0) << s.err;
    EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 10000) << s.err;
  }
  fs::remove_all(profile);
  return withoutScriptsAndStyles(r.out);
}

}  // namespace opscope_test
