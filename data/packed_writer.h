// Writing a packed dataset (`crema pack`): the files of an image folder or list file copied into
// a few large shard files with an index (the format: data/packed_index.h; the reader:
// data/packed.h).
//
// Every file is decoded once while it is packed, so that what is packed is what the loader can
// read: a file that does not decode (or breaks a limit of data/image.h) is an error naming it,
// or, with skip_bad, left out and listed in the summary. `workers` threads prepare a chunk of
// files at a time, which is then written in sample order: the output is the same for any number
// of workers.
//
// A file's bytes are kept as they are, unless `max_side` is set and the image's longer side is
// larger: it is then resized (the resize transform's antialiased triangle filter) so that its
// longer side is max_side, the shorter one rounded, and re-encoded as JPEG at `quality` (gray
// when its three channels are equal), whatever its format was (as FFCV does). Re-encoded samples
// differ from the files by the resize and JPEG's loss; the others decode to the same pixels.
//
// Atomic: everything is written into a hidden folder beside OUT (.OUT.tmp-<pid>), each file
// fsync'ed, and the folder renamed to OUT at the end. An earlier packed dataset at OUT is
// replaced only then (moved aside, the new one renamed in, the old one removed); a failure at
// any point leaves OUT as it was. OUT may not be another kind of folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/image_files.h"

namespace crema::data {

struct PackOptions {
  uint64_t shard_bytes = 256ull << 20;  // a new shard begins where the next sample would pass it
  int64_t max_side = 0;                 // re-encode images with a longer side; 0: keep every file
  int quality = 90;                     // JPEG quality of re-encoded images, 1..100
  bool skip_bad = false;  // leave out files that do not decode (listed in the summary)
  int workers = 1;        // threads reading, decoding and re-encoding files
  int64_t max_pixels = kDefaultMaxImagePixels;
  std::string root;  // sample paths are kept relative to it (the folder, or the list's root)
};

struct PackSummary {
  int64_t samples = 0;               // packed
  int64_t reencoded = 0;             // of which resized and re-encoded (max_side)
  std::vector<std::string> skipped;  // the error of each file left out (skip_bad)
  uint64_t bytes = 0;                // in the shards
  size_t shards = 0;
};

// Packs `source` into the folder `out_dir` as described above. Throws crema::Error naming the
// file for a file that cannot be read (without skip_bad), when nothing is left to pack, and for
// a folder that cannot be written.
PackSummary write_packed(const ImageFileDataset& source, const std::string& out_dir,
                         const PackOptions& options);

}  // namespace crema::data
