// The set of measured profiles a run uses, loaded from a folder in either
// layout (or both).
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/fs_errors.h"
#include "cost/text_fields.h"
#include "gpemu/cost_model.h"
#include "gpemu/error.h"

namespace gpemu {

namespace fs = std::filesystem;

std::string canonical_model_name(std::string_view name) {
  std::string out = cost_detail::to_lower(cost_detail::trim(name));
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::string_view to_string(ProfileLayout layout) {
  switch (layout) {
    case ProfileLayout::GPEmuArtifact: return "GPEmu profiled_data";
    case ProfileLayout::Native: return "gpemu-profile/1";
  }
  return "unknown";
}

namespace {

bool has_native_files(const fs::path& dir) {
  for (const auto& sub : list_folder(dir, "profiles")) {
    if (sub.path().filename().string().starts_with('.') || !is_folder(sub, "profiles")) continue;
    for (const auto& entry : list_folder(sub.path(), "profiles"))
      if (entry.path().extension() == ".json" && !entry.path().filename().string().starts_with('.') &&
          is_file(entry, "profiles"))
        return true;
  }
  return false;
}

}  // namespace

std::vector<ProfileLayout> ProfileDatabase::detect_layouts(const fs::path& dir) {
  if (!is_folder(dir, "profiles"))
    throw InputError(fmt::format("{}: profile folder does not exist or is not a folder", dir.string()));
  std::vector<ProfileLayout> layouts;
  if (is_folder(dir / "time", "profiles") || is_folder(dir / "memory", "profiles"))
    layouts.push_back(ProfileLayout::GPEmuArtifact);
  if (has_native_files(dir)) layouts.push_back(ProfileLayout::Native);
  return layouts;
}

ProfileDatabase ProfileDatabase::load(const fs::path& dir) {
  ProfileDatabase db;
  db.layouts_ = detect_layouts(dir);
  if (db.layouts_.empty())
    throw InputError(
        fmt::format("{}: holds no profiles; expected GPEmu's layout (time/compute/forward/<GPU>/<model>/"
                    "time_by_batch_size.csv, memory/<GPU>/<model>/memory.csv, ...) or gpemu's own "
                    "(<gpu-id>/<model>.json, see docs/profiles.md)",
                    dir.string()));
  for (ProfileLayout layout : db.layouts_) {
    std::vector<Profile> found =
        layout == ProfileLayout::GPEmuArtifact ? read_gpemu_artifact(dir, &db.warnings_) : read_native_profiles(dir);
    for (Profile& p : found) db.add(std::move(p));
  }
  return db;
}

void ProfileDatabase::add(Profile profile) {
  profile.model = canonical_model_name(profile.model);
  if (const Profile* existing = find(profile.gpu, profile.model))
    throw InputError(fmt::format("two profiles for {}/{}: {} and {}; expected one per GPU and model", profile.gpu,
                                 profile.model, existing->source, profile.source));
  index_.emplace(std::make_pair(profile.gpu, profile.model), profiles_.size());
  profiles_.push_back(std::move(profile));
}

const Profile* ProfileDatabase::find(std::string_view gpu_id, std::string_view model) const {
  auto it = index_.find({std::string(gpu_id), canonical_model_name(model)});
  return it == index_.end() ? nullptr : &profiles_[it->second];
}

std::vector<std::string> ProfileDatabase::models() const {
  std::set<std::string> names;
  for (const Profile& p : profiles_) names.insert(p.model);
  return {names.begin(), names.end()};
}

std::vector<std::string> ProfileDatabase::gpus() const {
  std::set<std::string> ids;
  for (const Profile& p : profiles_) ids.insert(p.gpu);
  return {ids.begin(), ids.end()};
}

}  // namespace gpemu
