//! The layers as a build fact: every path in the library's code is resolved
//! to the file it names, and the build fails on an arrow that points up the
//! layers or on files that import each other.
//!
//! Counting rule, written once here:
//! - code only: comments and string literals are not code (the lexer drops
//!   them), items under `#[cfg(test)]` are left out (test modules, and files
//!   declared under it), and `pub use` re-exports are not edges of their own
//!   (a path through a re-export is followed to the item's own file);
//! - every path counts, `use` lines and inline paths alike (`crate::`,
//!   `super::`, `self::`, a child module's name, or a name a `use` bound to
//!   a module), also inside macro calls;
//! - an edge joins the file that writes the path to the file that defines
//!   the module the path ends in; an edge inside one file is no edge.
//!
//! Why a test and not one crate per layer: the layers here are folders of
//! one library, and a test can also forbid what crates cannot (two files of
//! one folder importing each other, a `mod.rs` both holding its children's
//! types and calling into them). It runs in a fraction of a second.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The layers, bottom first: a top-level module may import its own layer's
/// modules only where listed in [`SAME_LAYER`], and any module of a lower
/// layer. `main.rs` (the binary) sits above everything.
const LAYERS: &[&[&str]] = &[
    &["error", "output"],
    &["base"],
    &["host", "nic"],
    &["doctor", "plan", "inspect", "gather", "fleet"],
    &["apply"],
    &["bench", "monitor", "testbed", "trace"],
    &["serve", "experiment"],
    &["cli"],
];

/// Modules of one layer that may import each other, in this direction only.
const SAME_LAYER: &[(&str, &str)] = &[
    ("error", "output"),
    ("doctor", "plan"),
    ("experiment", "serve"),
];

/// One `.rs` file of the library and the module it defines.
#[derive(Debug, Clone)]
pub struct Source {
    /// Path relative to the tree, `apply/journal.rs`.
    pub file: String,
    /// Module path without `crate`: `["apply", "journal"]`.
    pub module: Vec<String>,
    tokens: TokenStream,
}

/// What the checker found.
#[derive(Debug, Default)]
pub struct Report {
    /// file -> files it imports.
    pub edges: BTreeMap<String, BTreeSet<String>>,
    /// `from -> to` where `to` is in a higher layer (or a same-layer module
    /// not listed in [`SAME_LAYER`]).
    pub upward: Vec<(String, String)>,
    /// Groups of files that import each other (strongly connected).
    pub cycles: Vec<Vec<String>>,
}

impl Report {
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (from, to) in &self.upward {
            out.push_str(&format!("upward: {from} -> {to}\n"));
        }
        for group in &self.cycles {
            out.push_str(&format!("cycle: {}\n", group.join(" <-> ")));
        }
        out
    }
}

/// Read every file under `src` (the library: `lib.rs` and its modules;
/// `main.rs` counts as the top).
pub fn load(src: &Path) -> Vec<Source> {
    let mut files = crate::common::files_under(src, &|p| p.extension().is_some_and(|e| e == "rs"));
    files.sort();
    let mut sources = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path).expect("read source");
        let tokens =
            TokenStream::from_str(&text).unwrap_or_else(|err| panic!("{rel}: cannot lex: {err:?}"));
        sources.push(Source {
            module: module_of(&rel),
            file: rel,
            tokens,
        });
    }
    sources
}

fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The checker itself: the edges, the arrows that point up and the circles.
pub fn check(sources: &[Source]) -> Report {
    let cleaned: Vec<(Source, Declared)> = sources
        .iter()
        .map(|s| {
            let mut declared = Declared::default();
            let tokens = strip_tests(s.tokens.clone(), &mut declared);
            (
                Source {
                    tokens,
                    ..s.clone()
                },
                declared,
            )
        })
        .collect();
    // Files declared only under #[cfg(test)] are test code.
    let mut test_files: BTreeSet<String> = BTreeSet::new();
    for (source, declared) in &cleaned {
        let dir = dir_of(&source.file);
        for name in &declared.test_modules {
            test_files.insert(format!("{dir}{name}.rs"));
            test_files.insert(format!("{dir}{name}/mod.rs"));
        }
        for path in &declared.test_paths {
            test_files.insert(format!("{}{path}", parent_dir(&source.file)));
        }
    }
    let live: Vec<&(Source, Declared)> = cleaned
        .iter()
        .filter(|(s, _)| !test_files.contains(&s.file) && s.file != "main.rs")
        .collect();

    let mut modules: BTreeMap<Vec<String>, ModuleInfo> = BTreeMap::new();
    for (source, declared) in &live {
        let uses = collect_uses(&source.tokens);
        let mut info = ModuleInfo {
            file: source.file.clone(),
            children: declared.children.clone(),
            reexports: BTreeMap::new(),
            globs: Vec::new(),
        };
        for u in &uses {
            if u.public {
                let path = absolute(&u.path, &source.module, &declared.children, None);
                if let Some(path) = path {
                    match &u.binding {
                        Binding::Name(name) => {
                            info.reexports.insert(name.clone(), path);
                        }
                        Binding::Glob => info.globs.push(path),
                    }
                }
            }
        }
        modules.insert(source.module.clone(), info);
    }

    let mut report = Report::default();
    for (source, declared) in &live {
        let uses = collect_uses(&source.tokens);
        let mut bound: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for u in uses.iter().filter(|u| !u.public) {
            if let (Binding::Name(name), Some(path)) = (
                &u.binding,
                absolute(&u.path, &source.module, &declared.children, None),
            ) {
                bound.insert(name.clone(), path);
            }
        }
        let mut targets = BTreeSet::new();
        for u in uses.iter().filter(|u| !u.public) {
            if let Some(path) = absolute(&u.path, &source.module, &declared.children, None) {
                targets.insert(resolve(&modules, &path));
            }
        }
        for path in inline_paths(&source.tokens) {
            if let Some(path) = absolute(&path, &source.module, &declared.children, Some(&bound)) {
                targets.insert(resolve(&modules, &path));
            }
        }
        targets.remove(&source.file);
        targets.remove("");
        report.edges.insert(source.file.clone(), targets);
    }
    // `main.rs` is the binary: it may name anything; it is no part of a circle.
    for (from, tos) in &report.edges {
        for to in tos {
            if !allowed(from, to) {
                report.upward.push((from.clone(), to.clone()));
            }
        }
    }
    report.cycles = strongly_connected(&report.edges);
    report
}

#[derive(Debug, Default)]
struct Declared {
    /// `mod x;` outside test code.
    children: BTreeSet<String>,
    /// `#[cfg(test)] mod x;`
    test_modules: BTreeSet<String>,
    /// `#[cfg(test)] #[path = "x_tests.rs"] mod tests;`
    test_paths: BTreeSet<String>,
}

#[derive(Debug)]
struct ModuleInfo {
    file: String,
    children: BTreeSet<String>,
    reexports: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
}

fn dir_of(file: &str) -> String {
    // The folder a file's child modules live in.
    let stem = file.trim_end_matches(".rs");
    if stem.ends_with("mod") || stem == "lib" || stem == "main" {
        parent_dir(file)
    } else {
        format!("{stem}/")
    }
}

fn parent_dir(file: &str) -> String {
    match file.rfind('/') {
        Some(i) => file[..=i].to_string(),
        None => String::new(),
    }
}

fn layer_of(file: &str) -> (usize, String) {
    let top = file
        .split('/')
        .next()
        .unwrap_or(file)
        .trim_end_matches(".rs")
        .to_string();
    if top == "lib" {
        return (LAYERS.len(), top);
    }
    let rank = LAYERS
        .iter()
        .position(|layer| layer.contains(&top.as_str()))
        .unwrap_or_else(|| {
            panic!("top-level module '{top}' ({file}) has no layer: add it to LAYERS")
        });
    (rank, top)
}

fn allowed(from: &str, to: &str) -> bool {
    let (from_rank, from_top) = layer_of(from);
    let (to_rank, to_top) = layer_of(to);
    if from_top == to_top {
        return true;
    }
    if from_rank != to_rank {
        return to_rank < from_rank;
    }
    SAME_LAYER.contains(&(from_top.as_str(), to_top.as_str()))
}

/// The tokens without items under `#[cfg(test)]`, recording the modules
/// declared (test or not) at the top of the file.
fn strip_tests(tokens: TokenStream, declared: &mut Declared) -> TokenStream {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::new();
    let mut i = 0;
    while i < trees.len() {
        // Attributes in front of an item.
        let mut j = i;
        let mut is_test = false;
        let mut path_attr = None;
        while j + 1 < trees.len() && is_punct(&trees[j], '#') {
            let TokenTree::Group(group) = &trees[j + 1] else {
                break;
            };
            if group.delimiter() != Delimiter::Bracket {
                break;
            }
            let text = group.stream().to_string();
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            if compact.starts_with("cfg(")
                && compact.contains("test")
                && !compact.contains("not(test")
            {
                is_test = true;
            }
            if let Some(rest) = compact.strip_prefix("path=") {
                path_attr = Some(rest.trim_matches('"').to_string());
            }
            j += 2;
        }
        let item_end = item_end(&trees, j);
        let module = module_decl(&trees[j..item_end]);
        if is_test {
            if let Some((name, inline)) = module {
                if !inline {
                    match path_attr {
                        Some(path) => {
                            declared.test_paths.insert(path);
                        }
                        None => {
                            declared.test_modules.insert(name);
                        }
                    }
                }
            }
            i = item_end;
            continue;
        }
        if let Some((name, false)) = module {
            declared.children.insert(name);
        }
        for tree in &trees[i..item_end] {
            out.push(match tree {
                TokenTree::Group(group) => {
                    let mut inner = Declared::default();
                    let stream = strip_tests(group.stream(), &mut inner);
                    let mut new = proc_macro2::Group::new(group.delimiter(), stream);
                    new.set_span(group.span());
                    TokenTree::Group(new)
                }
                other => other.clone(),
            });
        }
        i = item_end.max(i + 1);
    }
    out.into_iter().collect()
}

/// Where the item starting at `start` ends: after its `;`, or after the
/// brace group that closes it (`fn`, `mod`, `impl`, ...).
fn item_end(trees: &[TokenTree], start: usize) -> usize {
    let mut k = start;
    while k < trees.len() {
        match &trees[k] {
            TokenTree::Punct(p) if p.as_char() == ';' => return k + 1,
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                // `struct S { .. }` and `fn f() { .. }` end here; a brace
                // group followed by `;`, `,` or more items is still the end.
                return k + 1;
            }
            _ => k += 1,
        }
    }
    trees.len()
}

/// `mod name;` -> (name, false), `mod name { .. }` -> (name, true).
fn module_decl(item: &[TokenTree]) -> Option<(String, bool)> {
    let pos = item.iter().position(|t| is_ident(t, "mod"))?;
    // `pub mod`, `pub(crate) mod`: anything before `mod` is visibility.
    if item[..pos]
        .iter()
        .any(|t| is_ident(t, "fn") || is_ident(t, "use"))
    {
        return None;
    }
    let TokenTree::Ident(name) = item.get(pos + 1)? else {
        return None;
    };
    let inline = matches!(item.get(pos + 2), Some(TokenTree::Group(_)));
    Some((name.to_string(), inline))
}

fn is_punct(tree: &TokenTree, c: char) -> bool {
    matches!(tree, TokenTree::Punct(p) if p.as_char() == c)
}

fn is_ident(tree: &TokenTree, name: &str) -> bool {
    matches!(tree, TokenTree::Ident(i) if i == name)
}

#[derive(Debug, Clone)]
enum Binding {
    Name(String),
    Glob,
}

#[derive(Debug, Clone)]
struct Use {
    public: bool,
    path: Vec<String>,
    binding: Binding,
}

/// Every `use` declaration, at any depth, flattened to one path each.
fn collect_uses(tokens: &TokenStream) -> Vec<Use> {
    let mut out = Vec::new();
    collect_uses_in(tokens, &mut out);
    out
}

fn collect_uses_in(tokens: &TokenStream, out: &mut Vec<Use>) {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        if is_ident(&trees[i], "use") && starts_item(&trees, i) {
            let public = visibility_before(&trees, i);
            let end = (i..trees.len())
                .find(|&k| is_punct(&trees[k], ';'))
                .unwrap_or(trees.len());
            flatten_use(&trees[i + 1..end], Vec::new(), public, out);
            i = end + 1;
            continue;
        }
        if let TokenTree::Group(group) = &trees[i] {
            collect_uses_in(&group.stream(), out);
        }
        i += 1;
    }
}

/// `use` starts an item when it follows `;`, `}`, an attribute, a
/// visibility, or the start of a block (not `x.use`, which is no Rust).
fn starts_item(trees: &[TokenTree], i: usize) -> bool {
    let mut k = i;
    // Skip `pub`, `pub(crate)`.
    if k >= 1
        && matches!(&trees[k - 1], TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis)
    {
        k -= 1;
    }
    if k >= 1 && is_ident(&trees[k - 1], "pub") {
        k -= 1;
    }
    if k == 0 {
        return true;
    }
    match &trees[k - 1] {
        TokenTree::Punct(p) => p.as_char() == ';' || p.as_char() == '}',
        TokenTree::Group(g) => matches!(g.delimiter(), Delimiter::Brace | Delimiter::Bracket),
        _ => false,
    }
}

fn visibility_before(trees: &[TokenTree], i: usize) -> bool {
    (i >= 1 && is_ident(&trees[i - 1], "pub"))
        || (i >= 2
            && is_ident(&trees[i - 2], "pub")
            && matches!(&trees[i - 1], TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis))
}

fn flatten_use(tree: &[TokenTree], prefix: Vec<String>, public: bool, out: &mut Vec<Use>) {
    let mut path = prefix;
    let mut k = 0;
    // A leading `::` (extern crate path) is not ours.
    while k < tree.len() {
        match &tree[k] {
            TokenTree::Ident(ident) => {
                let name = ident.to_string();
                if name == "as" {
                    let alias = match tree.get(k + 1) {
                        Some(TokenTree::Ident(a)) => a.to_string(),
                        _ => String::new(),
                    };
                    if alias != "_" {
                        let mut p = path.clone();
                        if p.last().is_some_and(|l| l == "self") {
                            p.pop();
                        }
                        out.push(Use {
                            public,
                            path: p,
                            binding: Binding::Name(alias),
                        });
                    } else {
                        out.push(Use {
                            public: false,
                            path: path.clone(),
                            binding: Binding::Glob,
                        });
                    }
                    return;
                }
                path.push(name);
                k += 1;
            }
            TokenTree::Punct(p) if p.as_char() == ':' => k += 1,
            TokenTree::Punct(p) if p.as_char() == '*' => {
                out.push(Use {
                    public,
                    path: path.clone(),
                    binding: Binding::Glob,
                });
                return;
            }
            TokenTree::Group(group) if group.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                for part in inner.split(|t| is_punct(t, ',')) {
                    if !part.is_empty() {
                        flatten_use(part, path.clone(), public, out);
                    }
                }
                return;
            }
            _ => k += 1,
        }
    }
    let mut p = path;
    if p.last().is_some_and(|l| l == "self") {
        p.pop();
    }
    if let Some(last) = p.last().cloned() {
        out.push(Use {
            public,
            path: p,
            binding: Binding::Name(last),
        });
    }
}

/// Every `a::b::c` path outside `use` declarations, macro bodies included.
fn inline_paths(tokens: &TokenStream) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    inline_paths_in(tokens, &mut out);
    out
}

fn inline_paths_in(tokens: &TokenStream, out: &mut Vec<Vec<String>>) {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        if is_ident(&trees[i], "use") && starts_item(&trees, i) {
            // Skip the declaration: collect_uses saw it.
            while i < trees.len() && !is_punct(&trees[i], ';') {
                i += 1;
            }
            i += 1;
            continue;
        }
        match &trees[i] {
            TokenTree::Group(group) => {
                inline_paths_in(&group.stream(), out);
                i += 1;
            }
            TokenTree::Ident(ident) => {
                // A path starts at an ident not preceded by `::`.
                let preceded =
                    i >= 2 && is_punct(&trees[i - 1], ':') && is_punct(&trees[i - 2], ':');
                let mut path = vec![ident.to_string()];
                let mut k = i + 1;
                while k + 2 < trees.len() + 1
                    && k + 1 < trees.len()
                    && is_punct(&trees[k], ':')
                    && is_punct(&trees[k + 1], ':')
                {
                    match trees.get(k + 2) {
                        Some(TokenTree::Ident(next)) => {
                            path.push(next.to_string());
                            k += 3;
                        }
                        _ => break,
                    }
                }
                if !preceded && path.len() > 1 {
                    out.push(path);
                }
                i = k.max(i + 1);
            }
            _ => i += 1,
        }
    }
}

/// The path from the crate root (without `crate`) a written path names, or
/// None when it names something outside this crate.
fn absolute(
    path: &[String],
    module: &[String],
    children: &BTreeSet<String>,
    bound: Option<&BTreeMap<String, Vec<String>>>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String>;
    let mut rest = &path[1..];
    match first.as_str() {
        "crate" | "nettune" => base = Vec::new(),
        "self" => base = module.to_vec(),
        "super" => {
            base = module.to_vec();
            base.pop();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        name if children.contains(name) => {
            base = module.to_vec();
            base.push(name.to_string());
        }
        name => {
            let target = bound?.get(name)?;
            base = target.clone();
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file that defines what `path` names, following `pub use` re-exports.
fn resolve(modules: &BTreeMap<Vec<String>, ModuleInfo>, path: &[String]) -> String {
    let mut path = path.to_vec();
    for _ in 0..16 {
        let mut current: Vec<String> = Vec::new();
        let mut redirected = None;
        for (i, segment) in path.iter().enumerate() {
            let Some(info) = modules.get(&current) else {
                break;
            };
            if info.children.contains(segment) {
                current.push(segment.clone());
                continue;
            }
            if let Some(target) = info.reexports.get(segment) {
                let mut next = target.clone();
                next.extend(path[i + 1..].iter().cloned());
                redirected = Some(next);
            } else {
                // A glob re-export (`pub use child::*`) names its module.
                for glob in &info.globs {
                    let mut probe = glob.clone();
                    probe.push(segment.clone());
                    if modules.contains_key(&probe[..probe.len() - 1])
                        && defines(modules, glob, segment)
                    {
                        let mut next = probe;
                        next.extend(path[i + 1..].iter().cloned());
                        redirected = Some(next);
                        break;
                    }
                }
            }
            break;
        }
        match redirected {
            Some(next) if next != path => path = next,
            _ => {
                return modules
                    .get(&current)
                    .map(|m| m.file.clone())
                    .unwrap_or_default()
            }
        }
    }
    String::new()
}

fn defines(modules: &BTreeMap<Vec<String>, ModuleInfo>, module: &[String], name: &str) -> bool {
    // Without a full name table, a glob re-export is taken to define any
    // name its module does not hand on elsewhere.
    modules
        .get(module)
        .is_some_and(|m| !m.reexports.contains_key(name))
}

/// Tarjan's algorithm: groups of two or more files that reach each other.
fn strongly_connected(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        groups: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(tos) = s.edges.get(v) {
            for w in tos {
                let w = w.as_str();
                if !s.edges.contains_key(w) {
                    continue;
                }
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(lw));
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(iw));
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.groups.push(group);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        groups: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.groups.sort();
    state.groups
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Violations that exist today and are being removed: the test fails on
/// any violation not listed here (a new arrow up, a new or larger circle),
/// so the lists can only shrink. Empty means the layers hold.
const KNOWN_UPWARD: &[&str] = &[];

/// Circles that exist today, each as the folder prefixes of its files: a
/// circle found later passes only if every file of it is inside one of
/// these groups' folders.
const KNOWN_CYCLES: &[&[&str]] = &[];

/// What the report has beyond the known violations.
fn new_violations(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for (from, to) in &report.upward {
        let edge = format!("{from} -> {to}");
        if !KNOWN_UPWARD.contains(&edge.as_str()) {
            out.push(format!("upward: {edge}"));
        }
    }
    for group in &report.cycles {
        let known = KNOWN_CYCLES.iter().any(|prefixes| {
            group
                .iter()
                .all(|file| prefixes.iter().any(|p| file.starts_with(p)))
        });
        if !known {
            out.push(format!("cycle: {}", group.join(" <-> ")));
        }
    }
    out
}

#[test]
fn no_import_points_up_and_no_files_import_each_other() {
    let report = check(&load(&src_dir()));
    if std::env::var_os("NETTUNE_LAYERS_EDGES").is_some() {
        for (from, tos) in &report.edges {
            for to in tos {
                eprintln!("edge: {from} -> {to}");
            }
        }
        eprint!("{}", report.describe());
    }
    let new = new_violations(&report);
    assert!(
        new.is_empty(),
        "the layers (tests/integration/layering.rs) are broken: put what both \
         sides need one layer down, or in a leaf file both import:\n{}",
        new.join("\n")
    );
    // A fixed violation must leave the list, so it cannot come back.
    for known in KNOWN_UPWARD {
        assert!(
            report
                .upward
                .iter()
                .any(|(from, to)| format!("{from} -> {to}") == *known),
            "'{known}' is fixed: remove it from KNOWN_UPWARD"
        );
    }
}

/// Copies of the library with one deliberate fault each: the checker must
/// name exactly that fault.
fn with_fault(file: &str, line: &str) -> Report {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&src_dir(), dir.path());
    let path = dir.path().join(file);
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.push_str(line);
    std::fs::write(&path, text).expect("write");
    check(&load(dir.path()))
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let path = entry.expect("entry").path();
        let dest = to.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).expect("copy");
        }
    }
}

#[test]
fn an_import_added_upward_is_caught() {
    let report = with_fault(
        "base/units.rs",
        "\nfn layering_fault() -> usize { crate::apply::journal::FORMAT_VERSION as usize }\n",
    );
    assert!(
        report
            .upward
            .contains(&("base/units.rs".to_string(), "apply/journal.rs".to_string())),
        "{}",
        report.describe()
    );
    // Through a `use` line and a re-export, too.
    let report = with_fault("host/softnet.rs", "\nuse crate::plan::Plan;\n");
    assert!(
        report
            .upward
            .iter()
            .any(|(from, to)| from == "host/softnet.rs" && to.starts_with("plan/")),
        "{}",
        report.describe()
    );
}

#[test]
fn two_files_that_import_each_other_are_caught() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&src_dir(), dir.path());
    for (file, line) in [
        (
            "base/counter.rs",
            "\nfn fault_a() -> u8 { crate::base::units::FAULT }\n",
        ),
        (
            "base/units.rs",
            "\nfn fault_b() -> u8 { super::counter::FAULT }\n",
        ),
    ] {
        let path = dir.path().join(file);
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str(line);
        std::fs::write(&path, text).expect("write");
    }
    let report = check(&load(dir.path()));
    let pair = ["base/counter.rs".to_string(), "base/units.rs".to_string()];
    assert!(
        report.cycles.iter().any(|g| g == &pair),
        "{}",
        report.describe()
    );
}
