#include "runtime/model_files/gguf/gguf_builder.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

namespace troupe::gguf {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kChunkBytes = 8ull << 20;  // rows written per fwrite when streaming a file

template <class T>
void put(std::vector<uint8_t>& b, T v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& b, std::string_view s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Rows of a tensor per chunk: at least one, about kChunkBytes.
int64_t rows_per_chunk(uint64_t row_bytes) {
  return std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / std::max<uint64_t>(row_bytes, 1)));
}

}  // namespace

GgufBuilder::Entry& GgufBuilder::entry(std::string key, uint32_t type) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  if (it == entries_.end()) it = entries_.insert(entries_.end(), Entry{std::move(key), {}});
  it->value.clear();
  put<uint32_t>(it->value, type);
  return *it;
}

void GgufBuilder::set_u32(std::string key, uint32_t v) {
  put(entry(std::move(key), static_cast<uint32_t>(ValueType::uint32)).value, v);
}
void GgufBuilder::set_u64(std::string key, uint64_t v) {
  put(entry(std::move(key), static_cast<uint32_t>(ValueType::uint64)).value, v);
}
void GgufBuilder::set_f32(std::string key, float v) {
  put(entry(std::move(key), static_cast<uint32_t>(ValueType::float32)).value, v);
}
void GgufBuilder::set_bool(std::string key, bool v) {
  put<uint8_t>(entry(std::move(key), static_cast<uint32_t>(ValueType::boolean)).value, v ? 1 : 0);
}
void GgufBuilder::set_string(std::string key, std::string v) {
  put_string(entry(std::move(key), static_cast<uint32_t>(ValueType::string)).value, v);
}
void GgufBuilder::set_i32_array(std::string key, std::vector<int32_t> v) {
  auto& b = entry(std::move(key), static_cast<uint32_t>(ValueType::array)).value;
  put<uint32_t>(b, static_cast<uint32_t>(ValueType::int32));
  put<uint64_t>(b, v.size());
  for (int32_t x : v) put(b, x);
}
void GgufBuilder::set_f32_array(std::string key, std::vector<float> v) {
  auto& b = entry(std::move(key), static_cast<uint32_t>(ValueType::array)).value;
  put<uint32_t>(b, static_cast<uint32_t>(ValueType::float32));
  put<uint64_t>(b, v.size());
  for (float x : v) put(b, x);
}
void GgufBuilder::set_string_array(std::string key, std::vector<std::string> v) {
  auto& b = entry(std::move(key), static_cast<uint32_t>(ValueType::array)).value;
  put<uint32_t>(b, static_cast<uint32_t>(ValueType::string));
  put<uint64_t>(b, v.size());
  for (const auto& s : v) put_string(b, s);
}

Status GgufBuilder::add_tensor_3d(std::string name, DType type, int64_t ne0, int64_t ne1, int64_t ne2, FillRows fill) {
  if (ne1 <= 0 || ne2 <= 0)
    return invalid_argument("GGUF tensor '" + name + "': a 3-D tensor needs positive ne1 and ne2");
  TROUPE_RETURN_IF_ERROR(add_tensor(std::move(name), type, ne0, ne1 * ne2, std::move(fill)));
  tensors_.back().ne1 = ne1;
  tensors_.back().ne2 = ne2;
  return {};
}

Status GgufBuilder::add_tensor(std::string name, DType type, int64_t ne0, int64_t rows, FillRows fill) {
  const int64_t rb = row_bytes(type, ne0);
  if (ne0 <= 0 || rows < 0 || rb < 0)
    return invalid_argument("GGUF tensor '" + name + "': a row of " + std::to_string(ne0) + " elements is not a whole " +
                            "number of " + std::string(to_string(type)) + " blocks (" +
                            std::to_string(traits(type).block_elems) + " elements each)");
  for (const Tensor& t : tensors_)
    if (t.name == name) return invalid_argument("GGUF tensor '" + name + "' is added twice");
  Tensor t;
  t.name = std::move(name);
  t.type = type;
  t.ne0 = ne0;
  t.rows = rows;
  t.row_bytes = static_cast<uint64_t>(rb);
  t.nbytes = t.row_bytes * static_cast<uint64_t>(std::max<int64_t>(rows, 1));
  t.offset = round_up(data_bytes_, kAlignment);
  t.fill = std::move(fill);
  data_bytes_ = t.offset + t.nbytes;
  tensors_.push_back(std::move(t));
  return {};
}

std::vector<uint8_t> GgufBuilder::header() const {
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  put<uint32_t>(b, 3);
  put<uint64_t>(b, tensors_.size());
  put<uint64_t>(b, entries_.size());
  for (const Entry& e : entries_) {
    put_string(b, e.key);
    b.insert(b.end(), e.value.begin(), e.value.end());
  }
  for (const Tensor& t : tensors_) {
    put_string(b, t.name);
    put<uint32_t>(b, t.ne2 > 0 ? 3 : t.rows > 0 ? 2 : 1);
    put<uint64_t>(b, static_cast<uint64_t>(t.ne0));
    if (t.ne2 > 0) {
      put<uint64_t>(b, static_cast<uint64_t>(t.ne1));
      put<uint64_t>(b, static_cast<uint64_t>(t.ne2));
    } else if (t.rows > 0) {
      put<uint64_t>(b, static_cast<uint64_t>(t.rows));
    }
    put<uint32_t>(b, static_cast<uint32_t>(t.type));
    put<uint64_t>(b, t.offset);
  }
  b.resize(round_up(b.size(), kAlignment), 0);
  return b;
}

uint64_t GgufBuilder::size() const { return header().size() + round_up(data_bytes_, kAlignment); }

Status GgufBuilder::write_file(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return invalid_argument("cannot write " + path + ": " + std::strerror(errno));
  auto fail = [&](const char* what) {
    const std::string why = std::strerror(errno);
    std::fclose(f);
    std::remove(path.c_str());
    return internal_error(std::string(what) + " " + path + ": " + why);
  };
  const std::vector<uint8_t> head = header();
  if (std::fwrite(head.data(), 1, head.size(), f) != head.size()) return fail("cannot write");
  uint64_t at = 0;  // position in the data section
  std::vector<uint8_t> chunk;
  const std::vector<uint8_t> zeros(kAlignment, 0);
  for (const Tensor& t : tensors_) {
    if (std::fwrite(zeros.data(), 1, t.offset - at, f) != t.offset - at) return fail("cannot write");
    const int64_t rows = std::max<int64_t>(t.rows, 1);
    const int64_t step = rows_per_chunk(t.row_bytes);
    for (int64_t r = 0; r < rows; r += step) {
      const int64_t end = std::min(rows, r + step);
      chunk.resize(static_cast<size_t>(t.row_bytes * static_cast<uint64_t>(end - r)));
      t.fill(chunk.data(), r, end);
      if (std::fwrite(chunk.data(), 1, chunk.size(), f) != chunk.size()) return fail("cannot write");
    }
    at = t.offset + t.nbytes;
  }
  const uint64_t tail = round_up(at, kAlignment) - at;
  if (std::fwrite(zeros.data(), 1, tail, f) != tail) return fail("cannot write");
  if (std::fclose(f) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(path.c_str());
    return internal_error("cannot write " + path + ": " + why);
  }
  return {};
}

Result<GgufImage> GgufBuilder::build_in_memory(int threads) const {
  const std::vector<uint8_t> head = header();
  GgufImage image;
  image.size = head.size() + round_up(data_bytes_, kAlignment);
  const std::align_val_t align{kPage};
  auto* raw = static_cast<uint8_t*>(::operator new(round_up(image.size, kPage), align, std::nothrow));
  if (raw == nullptr)
    return resource_exhausted("cannot allocate " + std::to_string(image.size >> 20) + " MiB for the model in memory");
  std::shared_ptr<uint8_t> bytes(raw, [align](uint8_t* p) { ::operator delete(p, align); });
  std::memcpy(raw, head.data(), head.size());
  uint8_t* data = raw + head.size();
  std::memset(data, 0, round_up(data_bytes_, kAlignment));

  // Work items: chunks of rows of every tensor, taken in order by each thread.
  struct Item {
    const Tensor* t;
    int64_t begin, end;
  };
  std::vector<Item> items;
  for (const Tensor& t : tensors_) {
    const int64_t rows = std::max<int64_t>(t.rows, 1);
    const int64_t step = rows_per_chunk(t.row_bytes);
    for (int64_t r = 0; r < rows; r += step) items.push_back({&t, r, std::min(rows, r + step)});
  }
  int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n = std::min<int>(n, static_cast<int>(std::max<size_t>(items.size(), 1)));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < items.size(); i = next++) {
      const Item& it = items[i];
      it.t->fill(data + it.t->offset + it.t->row_bytes * static_cast<uint64_t>(it.begin), it.begin, it.end);
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();

  auto file = GgufFile::from_memory(raw, image.size);
  if (!file) return file.status();
  // The file owns the bytes it views: they are freed after it.
  image.file = std::shared_ptr<const GgufFile>(file.value().release(),
                                               [bytes](const GgufFile* f) { delete f; });
  return image;
}

}  // namespace troupe::gguf
