/** User-facing strings of the unsubscribe footer and the preference pages, by language. English is the fallback. */
export type Strings = {
  footer: string; // contains {link}
  unsubscribeLink: string;
  unsubscribeTitle: string;
  unsubscribeQuestion: string;
  unsubscribeButton: string;
  unsubscribedDone: string;
  subscribeTitle: string;
  subscribeButton: string;
  subscribedDone: string;
  manageTitle: string;
  manageSubscribed: string;
  manageUnsubscribed: string;
  invalidLink: string;
};

const en: Strings = {
  footer: 'You are receiving this email because you subscribed to our updates. {link}',
  unsubscribeLink: 'Unsubscribe',
  unsubscribeTitle: 'Unsubscribe',
  unsubscribeQuestion: 'Stop receiving marketing emails at {email}?',
  unsubscribeButton: 'Unsubscribe',
  unsubscribedDone: '{email} has been unsubscribed.',
  subscribeTitle: 'Subscribe',
  subscribeButton: 'Subscribe',
  subscribedDone: '{email} is subscribed again.',
  manageTitle: 'Email preferences',
  manageSubscribed: '{email} receives marketing emails.',
  manageUnsubscribed: '{email} does not receive marketing emails.',
  invalidLink: 'This link is invalid or has expired.',
};

const de: Strings = {
  footer: 'Sie erhalten diese E-Mail, weil Sie unsere Neuigkeiten abonniert haben. {link}',
  unsubscribeLink: 'Abmelden',
  unsubscribeTitle: 'Abmelden',
  unsubscribeQuestion: 'Keine Marketing-E-Mails mehr an {email} senden?',
  unsubscribeButton: 'Abmelden',
  unsubscribedDone: '{email} wurde abgemeldet.',
  subscribeTitle: 'Anmelden',
  subscribeButton: 'Anmelden',
  subscribedDone: '{email} ist wieder angemeldet.',
  manageTitle: 'E-Mail-Einstellungen',
  manageSubscribed: '{email} erhält Marketing-E-Mails.',
  manageUnsubscribed: '{email} erhält keine Marketing-E-Mails.',
  invalidLink: 'Dieser Link ist ungültig oder abgelaufen.',
};

const fr: Strings = {
  footer: 'Vous recevez cet e-mail car vous êtes abonné à nos actualités. {link}',
  unsubscribeLink: 'Se désabonner',
  unsubscribeTitle: 'Se désabonner',
  unsubscribeQuestion: 'Ne plus recevoir d’e-mails marketing à {email} ?',
  unsubscribeButton: 'Se désabonner',
  unsubscribedDone: '{email} a été désabonné.',
  subscribeTitle: 'S’abonner',
  subscribeButton: 'S’abonner',
  subscribedDone: '{email} est de nouveau abonné.',
  manageTitle: 'Préférences e-mail',
  manageSubscribed: '{email} reçoit les e-mails marketing.',
  manageUnsubscribed: '{email} ne reçoit pas les e-mails marketing.',
  invalidLink: 'Ce lien est invalide ou a expiré.',
};

const es: Strings = {
  footer: 'Recibes este correo porque te suscribiste a nuestras novedades. {link}',
  unsubscribeLink: 'Darse de baja',
  unsubscribeTitle: 'Darse de baja',
  unsubscribeQuestion: '¿Dejar de recibir correos de marketing en {email}?',
  unsubscribeButton: 'Darse de baja',
  unsubscribedDone: '{email} se ha dado de baja.',
  subscribeTitle: 'Suscribirse',
  subscribeButton: 'Suscribirse',
  subscribedDone: '{email} vuelve a estar suscrito.',
  manageTitle: 'Preferencias de correo',
  manageSubscribed: '{email} recibe correos de marketing.',
  manageUnsubscribed: '{email} no recibe correos de marketing.',
  invalidLink: 'Este enlace no es válido o ha caducado.',
};

const LOCALES: Record<string, Strings> = { en, de, fr, es };

/** Strings for a locale such as `de`, `de-AT` or `de_AT`; English when unknown. */
export function stringsFor(locale: unknown): Strings {
  if (typeof locale !== 'string') return en;
  return LOCALES[locale.toLowerCase().split(/[-_]/)[0]] ?? en;
}

export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The unsubscribe footer appended to MARKETING mail whose body does not place {{unsubscribeUrl}} itself. */
export function unsubscribeFooter(locale: unknown, unsubscribeUrl: string): string {
  const s = stringsFor(locale);
  const link = `<a href="${escapeHtml(unsubscribeUrl)}">${escapeHtml(s.unsubscribeLink)}</a>`;
  const text = escapeHtml(s.footer).replace('{link}', link);
  return `<div style="margin-top:32px;font-size:12px;color:#6b7280;text-align:center">${text}</div>`;
}

/** Inserts `fragment` before </body> when there is one, else appends it. */
export function appendToBody(html: string, fragment: string): string {
  const i = html.search(/<\/body\s*>/i);
  return i === -1 ? html + fragment : html.slice(0, i) + fragment + html.slice(i);
}
