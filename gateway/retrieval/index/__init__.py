"""The in-memory hybrid index: records, segments, BM25 postings, the snapshot, its backend protocol, the analyzer."""
