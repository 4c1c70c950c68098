// The SPARQL editor of semreg's console: CodeMirror 6 with the SPARQL mode, highlighting by CSS
// classes (so the console's light and dark themes colour it), and completion of PREFIX lines,
// CURIE prefixes and keywords. Bundled by build.mjs into semreg/ui/vendor/editor.js.
import { autocompletion, closeBrackets, completionKeymap } from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { bracketMatching, StreamLanguage, syntaxHighlighting } from "@codemirror/language";
import { sparql } from "@codemirror/legacy-modes/mode/sparql";
import { EditorState } from "@codemirror/state";
import { EditorView, keymap, lineNumbers, placeholder } from "@codemirror/view";
import { classHighlighter } from "@lezer/highlight";

const KEYWORDS = ["SELECT", "DISTINCT", "WHERE", "PREFIX", "FILTER", "OPTIONAL", "UNION", "GRAPH", "ORDER BY",
  "GROUP BY", "LIMIT", "OFFSET", "COUNT", "CONSTRUCT", "ASK", "DESCRIBE", "VALUES", "BIND", "MINUS", "FROM"];

// prefixes(): the known prefix map {name: iri}, read at each completion (it follows uploads).
function completions(prefixes) {
  return (context) => {
    const line = context.state.doc.lineAt(context.pos);
    const before = line.text.slice(0, context.pos - line.from);
    const declaring = /^\s*PREFIX\s+([\w-]*)$/i.exec(before);
    const known = Object.entries(prefixes());
    if (declaring) {
      return {
        from: context.pos - declaring[1].length,
        options: known.map(([name, iri]) => ({ label: `${name}: <${iri}>`, type: "namespace" })),
      };
    }
    const word = context.matchBefore(/[\w-]+:?[\w-]*/);
    if (!word || (word.from === word.to && !context.explicit)) return null;
    if (word.text.includes(":")) return null;
    return {
      from: word.from,
      options: [
        ...known.map(([name, iri]) => ({ label: `${name}:`, detail: iri, type: "namespace" })),
        ...KEYWORDS.map((k) => ({ label: k, type: "keyword" })),
      ],
    };
  };
}

// Colours from the console's stylesheet variables, so the editor follows its light and dark themes.
const theme = EditorView.theme({
  "&": { color: "var(--text)", backgroundColor: "var(--bg)" },
  ".cm-content": { caretColor: "var(--text)", fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, monospace" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--text)" },
  ".cm-gutters": { backgroundColor: "var(--panel)", color: "var(--muted)", borderRight: "1px solid var(--border)" },
  ".cm-activeLineGutter": { backgroundColor: "var(--panel)", color: "var(--text)" },
  ".cm-placeholder": { color: "var(--muted)" },
  "&.cm-focused .cm-selectionBackground, .cm-selectionBackground, .cm-content ::selection": { backgroundColor: "var(--info-bg)" },
  ".cm-tooltip": { backgroundColor: "var(--bg)", color: "var(--text)", border: "1px solid var(--border)" },
  ".cm-tooltip-autocomplete ul li[aria-selected]": { backgroundColor: "var(--accent)", color: "var(--accent-text)" },
  ".cm-completionDetail": { color: "inherit", opacity: 1 },
  "&.cm-focused .cm-matchingBracket": { backgroundColor: "var(--info-bg)", color: "var(--text)" },
});

// Make an editor in `parent`. onRun() is called on Ctrl-Enter / Cmd-Enter.
export function createEditor(parent, { doc = "", label = "SPARQL query", prefixes = () => ({}), onRun = () => {} }) {
  const run = () => { onRun(); return true; };
  return new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(),
        history(),
        bracketMatching(),
        closeBrackets(),
        StreamLanguage.define(sparql),
        syntaxHighlighting(classHighlighter),
        theme,
        autocompletion({ override: [completions(prefixes)] }),
        placeholder("SELECT * WHERE { ?s ?p ?o } LIMIT 10"),
        keymap.of([{ key: "Mod-Enter", run }, ...completionKeymap, ...defaultKeymap, ...historyKeymap, indentWithTab]),
        EditorView.contentAttributes.of({ "aria-label": label, "aria-multiline": "true" }),
        EditorView.lineWrapping,
      ],
    }),
  });
}

export function setText(view, text) {
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
}

export function getText(view) {
  return view.state.doc.toString();
}
