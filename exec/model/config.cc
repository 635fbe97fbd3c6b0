#include "exec/model/config.h"

namespace pipetwin::gpt {

std::optional<std::string> Validate(const ModelConfig& m, const ChunkSpec& c, const TpConfig& tp,
                                    const CpConfig& cp) {
  auto positive = [](int v) { return v > 0; };
  if (!positive(m.layers)) return "model.layers must be > 0";
  if (!positive(m.hidden)) return "model.hidden must be > 0";
  if (!positive(m.ffn_hidden)) return "model.ffn_hidden must be > 0";
  if (!positive(m.heads)) return "model.heads must be > 0";
  if (!positive(m.vocab)) return "model.vocab must be > 0";
  if (!positive(m.seq_len)) return "model.seq_len must be > 0";
  if (!positive(m.micro_batch)) return "training.micro_batch must be > 0";
  if (!(m.dropout >= 0.0f && m.dropout < 1.0f)) return "model.dropout must be in [0, 1)";
  if (m.hidden % m.heads != 0) return "model.hidden must be a multiple of model.heads";
  if (c.first_layer < 0 || c.num_layers < 0 || c.first_layer + c.num_layers > m.layers) {
    return "chunk layers [" + std::to_string(c.first_layer) + ", " +
           std::to_string(c.first_layer + c.num_layers) + ") lie outside the model's " +
           std::to_string(m.layers) + " layers";
  }
  if (c.first != (c.first_layer == 0))
    return "chunk.first must be set exactly when first_layer is 0";
  if (c.last != (c.first_layer + c.num_layers == m.layers)) {
    return "chunk.last must be set exactly when the chunk ends at the model's last layer";
  }
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size) return "parallel.tp: rank out of range";
  if (m.heads % tp.size != 0) return "model.heads must be a multiple of parallel.tp";
  if (m.kv_heads < 0 || m.heads % m.KvHeads() != 0) {
    return "model.kv_heads must divide model.heads";
  }
  if (m.KvHeads() % tp.size != 0) return "model.kv_heads must be a multiple of parallel.tp";
  if (m.ffn_hidden % tp.size != 0) return "model.ffn_hidden must be a multiple of parallel.tp";
  if (cp.size < 1 || cp.rank < 0 || cp.rank >= cp.size) return "parallel.cp: rank out of range";
  if (cp.size > 1 && m.seq_len % (2 * cp.size) != 0) {
    return "parallel.cp needs model.seq_len to be a multiple of 2 × parallel.cp (two chunks per "
           "rank, one from each end of the sequence)";
  }
  if (cp.size > 1 && cp.exchange == CpExchange::kAllToAll) {
    const int a = cp.AllToAllRanks();
    if (a < 2 || a > cp.size || cp.size % a != 0) {
      return "parallel.cp_a2a must lie in [2, parallel.cp] and divide it";
    }
    if ((m.heads / tp.size) % a != 0) {
      return "parallel.cp_comm: a2a needs each tensor-parallel rank's heads (model.heads / "
             "parallel.tp) to be a multiple of the all-to-all's ranks (parallel.cp, or cp_a2a "
             "with a2a+p2p): each attends over the tokens of its share of the heads";
    }
  }
  if (tp.sequence_parallel && (m.seq_len / cp.size) % tp.size != 0) {
    return "parallel.sp needs model.seq_len / parallel.cp to be a multiple of parallel.tp";
  }
  return std::nullopt;
}

LocalDims MakeLocalDims(const ModelConfig& m, const TpConfig& tp, const CpConfig& cp) {
  LocalDims d;
  const std::int64_t t = tp.size;
  d.batch = m.micro_batch;
  d.seq = m.seq_len;
  d.tokens = d.batch * d.seq;
  d.seq_local = d.seq / cp.size;
  d.tokens_local = d.batch * d.seq_local;
  d.rows = tp.sequence_parallel ? d.tokens_local / t : d.tokens_local;
  d.row_begin = tp.sequence_parallel ? tp.rank * d.rows : 0;
  d.hidden = m.hidden;
  d.hidden_local = m.hidden / t;
  d.heads_local = m.heads / t;
  d.kv_heads_local = m.KvHeads() / t;
  d.head_dim = m.hidden / m.heads;
  d.ffn_local = m.ffn_hidden / t;
  d.vocab = m.vocab;
  return d;
}

}  // namespace pipetwin::gpt
