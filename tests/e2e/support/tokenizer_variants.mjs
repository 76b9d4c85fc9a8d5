// tokenizer.json variants built from the fixtures' vocabularies with other components, so
// that conformance covers every component the general loader implements, not only the
// five families' own configurations. Each entry: [name, base fixture, patch(json)].
const bl = (aps, regex) => ({type: 'ByteLevel', add_prefix_space: aps, trim_offsets: true, use_regex: regex});
const split = (regex, behavior, invert = false) => ({type: 'Split', pattern: {Regex: regex}, behavior, invert});

export const variants = [
  ['gpt2_byte_level', 'qwen3', (j) => {
    j.normalizer = null;
    j.pre_tokenizer = bl(true, true);
  }],
  ['behaviors_nfkc_lowercase', 'llama3', (j) => {
    j.normalizer = {type: 'Sequence', normalizers: [{type: 'NFKC'}, {type: 'Lowercase'},
      {type: 'Replace', pattern: {Regex: '\\s{3,}'}, content: '  '}, {type: 'Strip', strip_left: true, strip_right: false}]};
    j.pre_tokenizer = {type: 'Sequence', pretokenizers: [
      split('\\p{N}+', 'MergedWithPrevious'), split('[\\p{P}\\p{S}]', 'MergedWithNext'),
      split('\\s+', 'Contiguous', true), split('(?<=[aeiou])(?=[^aeiou\\s])', 'Isolated'),
      split('\\w+|[^\\w\\s]+', 'Removed', true), bl(false, false)]};
  }],
  ['digits_punct_whitespace_nfd', 'qwen3', (j) => {
    j.normalizer = {type: 'NFD'};
    j.pre_tokenizer = {type: 'Sequence', pretokenizers: [
      {type: 'Digits', individual_digits: true}, {type: 'Punctuation', behavior: 'Isolated'},
      {type: 'Whitespace'}, bl(false, false)]};
  }],
  ['metaspace_first', 'llama2', (j) => {
    j.normalizer = null;
    j.pre_tokenizer = {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false};
    j.decoder = {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false};
  }],
  ['metaspace_split_digits', 'gemma3', (j) => {
    j.normalizer = {type: 'NFKD'};
    j.pre_tokenizer = {type: 'Sequence', pretokenizers: [{type: 'WhitespaceSplit'},
      {type: 'Digits', individual_digits: false},
      {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true}]};
  }],
  ['added_token_flags', 'qwen3', (j) => {
    j.added_tokens.forEach((t, i) => {
      t.lstrip = i % 3 === 0; t.rstrip = i % 4 === 1; t.single_word = i % 5 === 2;
      t.normalized = i % 2 === 1;
    });
    j.normalizer = {type: 'Sequence', normalizers: [{type: 'NFC'}, {type: 'Replace', pattern: {String: '|'}, content: '¦'}]};
    j.post_processor = {type: 'RobertaProcessing', sep: ['<|endoftext|>', 151643], cls: ['<|im_start|>', 151644], trim_offsets: true, add_prefix_space: false};
  }],
];
